#pragma once

// Node tables as a capture would give them, for what talks to the daemon
// without a training process: the daemon's round-trip benchmark and its
// protocol tests.

#include "compiler/ir.hpp"

#include <cstdint>
#include <string>

namespace gradd::measure {

/// The root, `links` nodes of type `kind` in a chain, and an AccumulateGrad:
/// the capture of y = f(f(...f(x))).
inline compiler::graph chain_table(size_t links,
                                   const std::string& kind = "torch::autograd::generated::TanhBackward0") {
  using namespace compiler;
  graph g;
  node_info root;
  root.type_name = "torch::autograd::GraphRoot";
  root.is_root = true;
  root.sequence_nr = 1000;
  root.edges = {{1, 0}};
  g.nodes.push_back(root);
  for (size_t i = 0; i < links; ++i) {
    node_info n;
    n.type_name = kind;
    n.sequence_nr = 500 - i;
    n.inputs = {tensor_meta{{8}, "float", "cpu", true}};
    n.edges = {{static_cast<uint32_t>(i + 2), 0}};
    g.nodes.push_back(n);
  }
  node_info acc;
  acc.type_name = "torch::autograd::AccumulateGrad";
  acc.sequence_nr = UINT64_MAX;
  acc.is_accumulate_grad = true;
  acc.inputs = {tensor_meta{{8}, "float", "cpu", true}};
  g.nodes.push_back(acc);
  return g;
}

} // namespace gradd::measure
