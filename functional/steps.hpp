#pragma once

// The stock engine's steps around the functional backwards, as functions
// that functional capture runs and replay runs again.
//
// A node's functional backward is only part of what the stock engine does
// for it: AccumulateGrad's update of `.grad` and CopySlices' work before and
// after its inner function (the output check is in
// execute/stock_steps.hpp). Capture performs each step while it
// records it, replay performs it from the recording; both call the same
// function, so both do what the stock engine does, bit for bit.

#include <ATen/TensorGeometry.h>
#include <ATen/core/Tensor.h>
#include <torch/csrc/autograd/function.h>

#include <vector>

namespace gradd::functional {

/// The stock engine's AccumulateGrad::apply on `variable`, given a gradient
/// this function may steal (as the stock engine does when nothing else holds
/// it).
void accumulate_into_grad(const at::Tensor& variable, at::Tensor&& grad);

/// CopySlices before its inner function: the gradient copied into a tensor
/// shaped like the base, the slice of it the view covers, and a contiguous
/// clone of that slice for the inner function.
torch::autograd::variable_list copy_slices_prologue(const at::Tensor& grad,
                                                    const at::TensorGeometry& base,
                                                    const at::TensorGeometry& view);

/// CopySlices after its inner function: the inner gradient for the view is
/// written into the base-shaped `result`, the others pass through.
torch::autograd::variable_list copy_slices_epilogue(const std::vector<bool>& needs_input_grad,
                                                    const at::Tensor& result,
                                                    const torch::autograd::variable_list& inner,
                                                    const at::Tensor& slice);

} // namespace gradd::functional
