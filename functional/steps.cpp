// The stock engine's steps around the functionals (see steps.hpp).
//
// AccumulateGrad and the output check call libtorch's own code; CopySlices'
// two halves copy the body of CopySlices::apply_impl around its inner call,
// as its compiled-autograd path splits it.

#include "functional/steps.hpp"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>

#include <sstream>

namespace gradd::functional {

using torch::autograd::variable_list;

void accumulate_into_grad(const at::Tensor& variable, at::Tensor&& grad) {
  at::Tensor& slot = variable.mutable_grad();
  torch::autograd::AccumulateGrad::accumulateGrad(
      variable, slot, grad, /*num_expected_refs=*/1,
      [&slot](at::Tensor&& update) { slot = std::move(update); });
}

variable_list copy_slices_prologue(const at::Tensor& grad, const at::TensorGeometry& base,
                                   const at::TensorGeometry& view) {
  auto result = grad.new_empty_strided_symint(base.sym_sizes(), base.sym_strides());
  result.copy_(grad);
  auto offset = view.sym_storage_offset() - base.sym_storage_offset();
  auto slice = result.as_strided_symint(view.sym_sizes(), view.sym_strides(), offset);
  auto slice_clone = slice.clone(at::MemoryFormat::Contiguous);
  return {std::move(result), std::move(slice), std::move(slice_clone)};
}

variable_list copy_slices_epilogue(const std::vector<bool>& needs_input_grad,
                                   const at::Tensor& result, const variable_list& inner,
                                   const at::Tensor& slice) {
  variable_list grads(needs_input_grad.size());
  for (size_t i = 0; i < inner.size() && i < grads.size(); ++i) {
    if (!needs_input_grad[i] || !inner[i].defined())
      continue;
    if (i == 0) {
      slice.copy_(inner[0]);
      grads[0] = result;
    } else {
      grads[i] = inner[i];
    }
  }
  return grads;
}

} // namespace gradd::functional
