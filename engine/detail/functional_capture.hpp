#pragma once

// Functional capture: one backward recorded as the functional backwards its
// nodes call, and replayed on later backwards of the same structure.
//
// Capture lifts every node's saved tensors, sizes and scalars through
// `compiled_args`, then runs each node's `apply_with_saved` under gradd's
// `PyCompilerInterface` with the node's own tensors as proxies, in the stock
// engine's order. So the backward really runs (capture by execution) while
// each functional call, gradient sum, `.grad` accumulation and CopySlices step
// lands as one op of a functional-level IR graph, its packed arguments marked
// as lifted inputs or constants. Replay lifts a later graph of the same
// structure the same way and calls the recorded functionals on its tensors.

#include "compiler/ir.hpp"

#include <ATen/TensorGeometry.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/autograd/edge.h>
#include <torch/csrc/autograd/function.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace torch::autograd {
struct GraphTask;
}

namespace gradd::engine::detail {

/// One packed argument of a functional call, as replay rebuilds it.
struct packed_argument {
  /// The argument as captured: the constant itself when `tensors` is empty,
  /// else the shape (tensor, tensor list, list or tuple) its tensors fill.
  c10::IValue value;
  /// The values standing for its tensors, in depth-first order; `no_value`
  /// for an undefined tensor.
  std::vector<compiler::value_id> tensors;
};

/// What replay needs for one op beyond the op itself.
struct op_payload {
  /// apply_functional: the node's functional backward, from the registry.
  std::shared_ptr<const torch::autograd::functional_apply_t> fn;
  /// apply_functional: its packed arguments, in order.
  std::vector<packed_argument> packed;
  /// copy_slices_prologue: the geometry of the base and of the view.
  std::optional<at::TensorGeometry> base;
  std::optional<at::TensorGeometry> view;
  /// copy_slices_epilogue: which of the node's outputs are computed.
  std::vector<bool> needs_input_grad;
};

/// A backward captured at the functional level, and what replaying it needs.
///
/// `ir.ops` holds, in execution order: one `graph_input` per lifted tensor
/// (`index` the lifted position), `apply_functional` (args: the gradient
/// inputs, `index` of them, then the values its packed arguments use),
/// `accumulate` (gradient sums, in the stock engine's order),
/// `validate_outputs` where the output check changed a gradient,
/// `copy_slices_prologue`/`epilogue`, `accumulate_grad` (`index` the lifted
/// position of the leaf) and a final `output` (the `autograd::grad` results).
/// `ir.nodes` lists the nodes that run or capture, in lifting order (type,
/// sequence number, edges, captures; no input metadata). Sizes and scalars
/// are specialized: replay checks that a later graph lifts the same ones.
struct functional_recording {
  compiler::graph ir;
  std::vector<op_payload> payloads;    ///< one per op of `ir.ops`
  std::vector<std::string> node_keys;  ///< per node: its name and specialization key
  std::vector<int64_t> sizes;          ///< lifted sizes, in lifting order
  std::vector<c10::IValue> scalars;    ///< lifted scalars, in lifting order
  uint32_t num_lifted = 0;             ///< lifted tensors
  std::vector<uint32_t> last_use;      ///< per value: the last op that reads (or defines) it
  std::vector<uint32_t> leaf_nodes;    ///< nodes whose stream the caller syncs with at the end
  /// What the captured backward returned: the `autograd::grad` results, or
  /// nothing for `backward()` (whose results went to `.grad`).
  torch::autograd::variable_list gradients;
};

/// Runs one backward, given what Engine::set_compiled_autograd's hook
/// receives, and records it. Gradients match the stock engine's bitwise:
/// nodes run in its ready-queue order and sums add in its arrival order.
///
/// Covers `backward()` and `autograd::grad()` without hooks and without
/// `create_graph`. Throws std::runtime_error naming the reason (a node without
/// `compiled_args` or `apply_with_saved`, hooks, Python objects, anomaly
/// mode, ...). Until it has succeeded, capture leaves no trace the stock
/// engine would see: `.grad` updates and the release of saved variables wait
/// for the end, so a caller that catches the error can run the same backward
/// on the stock engine. Leaf streams go to `task.leaf_streams`; the caller's
/// post-processing syncs them and runs final callbacks.
functional_recording capture_functional(const std::shared_ptr<torch::autograd::Node>& graph_root,
                                        const torch::autograd::GraphTask& task,
                                        bool accumulate_grad,
                                        const torch::autograd::edge_list& outputs);

/// Runs a later backward of the same structure by calling the functionals of
/// `recording` on this graph's lifted tensors: writes `.grad` for
/// `backward()`, returns the results for `autograd::grad()`, bitwise equal to
/// the stock engine. Throws std::runtime_error, before running anything, when
/// the graph differs from the recorded one (node types, constants, sizes,
/// scalars, which `.grad` exist) or is out of scope as for capture.
torch::autograd::variable_list replay_functional(
    const functional_recording& recording,
    const std::shared_ptr<torch::autograd::Node>& graph_root,
    const torch::autograd::GraphTask& task, bool accumulate_grad,
    const torch::autograd::edge_list& outputs);

/// Returns the functional backward bound under `name` in this process (a
/// node's `name()`, e.g. "MmBackward0"), or null if none was bound yet.
std::shared_ptr<const torch::autograd::functional_apply_t> bound_functional(
    const std::string& name);

} // namespace gradd::engine::detail
