#pragma once

// A backward captured at the functional level: what capture writes and
// replay reads.
//
// The IR holds the program: one op per functional call, gradient sum, output
// check, CopySlices step and `.grad` accumulation, over values that stand for
// the tensors in flight. What an op needs beyond the IR (the functional
// itself, its packed arguments, CopySlices' geometry) sits beside it in a
// payload, and the lifted sizes and scalars the capture specialized on are
// kept for replay to check.

#include "compiler/ir.hpp"

#include <ATen/TensorGeometry.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/autograd/function.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gradd::functional {

/// One packed argument of a functional call, as replay rebuilds it.
struct packed_argument {
  /// The argument as captured: the constant itself when `tensors` is empty,
  /// else the shape (tensor, tensor list, list or tuple) its tensors fill.
  c10::IValue value;
  /// The values standing for its tensors, in depth-first order; `no_value`
  /// for an undefined tensor.
  std::vector<compiler::value_id> tensors;

  /// Records `arg`, naming each of its tensors with `value_of`. An argument
  /// without a defined tensor is kept whole, as a constant; one with tensors
  /// keeps only its shape, since its tensors belong to this backward.
  static packed_argument record(
      const c10::IValue& arg,
      const std::function<compiler::value_id(const at::Tensor&)>& value_of);

  /// Rebuilds the argument, taking its tensors from `values` (by value id).
  c10::IValue rebuild(const std::vector<at::Tensor>& values) const;
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
/// `ir.nodes` is structural capture's node table of the graph, in walk order.
/// Sizes and scalars are specialized: replay checks that a later graph lifts
/// the same ones.
struct recording {
  compiler::graph ir;
  std::vector<op_payload> payloads;    ///< per op, by its id (ops keep ids through passes)
  std::vector<std::string> node_keys;  ///< per node: its name and specialization key
  std::vector<int64_t> sizes;          ///< lifted sizes, in lifting order
  std::vector<c10::IValue> scalars;    ///< lifted scalars, in lifting order
  uint32_t num_lifted = 0;             ///< lifted tensors
  std::vector<uint32_t> last_use;      ///< per value: position of the last op reading (or defining) it
  std::vector<uint32_t> leaf_nodes;    ///< nodes whose stream the caller syncs with at the end
  /// What the captured backward returned: the `autograd::grad` results, or
  /// nothing for `backward()` (whose results went to `.grad`).
  torch::autograd::variable_list gradients;
};

} // namespace gradd::functional
