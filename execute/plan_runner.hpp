#pragma once

#include "compiler/plan.hpp"

#include <torch/csrc/autograd/edge.h>
#include <torch/csrc/autograd/variable.h>

#include <vector>

namespace torch::autograd {
struct GraphTask;
struct Node;
}

namespace gradd::execute {

/// Whether the live nodes still have the sequence-number order `p` was
/// scheduled for (Note [Stock engine order]).
bool sequence_order_holds(const compiler::plan& p,
                          const std::vector<torch::autograd::Node*>& nodes) noexcept;

/// The outputs of chosen nodes as a plan run leaves them (checked, after
/// their hooks): what a CUDA graph cut at those nodes is recorded with
/// (Note [Piecewise graphs], cuda/piecewise.cpp).
struct output_tap {
  std::vector<bool> wanted;                              ///< per node, walk order
  std::vector<torch::autograd::variable_list> outputs;  ///< per node: its outputs, where wanted
  /// Keeps every node's saved variables for a recording, which releases
  /// them, while nodes and hooks still see the backward's own retain_graph
  /// (AOTAutograd's backward refuses donated buffers under retain_graph).
  bool keep_saved_variables = false;
};

/// Runs `p` over this backward's live `nodes` (in walk order) with the stock
/// engine's semantics for each node call: the node's stream, tensor pre-hooks,
/// retain_grad, pre- and post-hooks, release of saved variables unless
/// retain_graph, validate_outputs, gradient accumulation across streams.
/// Captured gradients are written to `task.captured_vars_`; with a `tap`,
/// the outputs of the nodes it wants to it. Exceptions from a node or hook
/// propagate unchanged.
void run_plan(const compiler::plan& p, const std::vector<torch::autograd::Node*>& nodes,
              torch::autograd::GraphTask& task, output_tap* tap = nullptr);

} // namespace gradd::execute
