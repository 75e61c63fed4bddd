#pragma once

#include "capture/structural_key.hpp"

#include <torch/csrc/autograd/edge.h>

#include <cstdint>
#include <vector>

namespace torch::autograd {
struct Node;
}

namespace gradd::capture {

/// One traversal of a backward's graph from its root.
///
/// Nodes get indices in discovery order (a depth-first walk following each
/// node's edges in order), so two graphs of the same structure list their
/// nodes in corresponding order and a plan can address nodes by index. The
/// walk follows the stock engine's compute_dependencies: with `outputs`
/// given, nodes older than every output (topological_nr below the outputs'
/// minimum) are listed but not expanded.
struct graph_walk {
  std::vector<torch::autograd::Node*> nodes;
  /// Node index of each output edge's function, or UINT32_MAX if unreached.
  std::vector<uint32_t> output_nodes;
  /// Nodes below this topological number are listed but not expanded.
  uint64_t min_topological_nr = 0;
  structural_key key;
};

/// Walks the graph under `root` into `out`, reusing its storage. The key
/// ends with `plan_variant`: what of the policy shapes a plan (Note [Policy
/// changes and cached plans], engine_state.hpp).
void walk_graph(torch::autograd::Node& root, const std::vector<torch::autograd::Edge>& outputs,
                bool keep_graph, bool accumulate_grad, uint64_t plan_variant, graph_walk& out);

} // namespace gradd::capture
