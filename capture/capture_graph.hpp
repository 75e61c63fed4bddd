#pragma once

#include "capture/graph_walk.hpp"
#include "compiler/ir.hpp"
#include "gradd/statistics.hpp"

#include <optional>

namespace torch::autograd {
struct GraphTask;
}

namespace gradd::capture {

/// The result of capturing one backward.
struct capture_result {
  compiler::graph ir;                           ///< the node table; ops come from lowering
  std::optional<fallback_reason> eager_reason;  ///< set when no plan may serve it
};

/// Captures the graph of `walk` as a node table: each node's type, edges,
/// hooks, input metadata and sequence number, and the outputs of
/// `autograd::grad` (compiler::lower_to_node_ops makes the program). Finds what gradd
/// must leave to the stock engine (nested tensors,
/// deprecated capture hooks). Reads the nodes; changes nothing.
capture_result capture_graph(const graph_walk& walk, const torch::autograd::GraphTask& task,
                             const std::vector<torch::autograd::Edge>& outputs, bool accumulate_grad);

} // namespace gradd::capture
