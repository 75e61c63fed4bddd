#pragma once

// A CUDA graph's static buffers: gradd-owned copies of the tensors it reads
// and hands out, laid out as they are (graph_capture.cpp, backward_graph.cpp,
// input_binding.cpp).

#include <ATen/core/Tensor.h>

#include <cstddef>

namespace gradd::cuda {

/// Bytes from a tensor's first element to the end of its last one: what a
/// copy of it in the same layout needs (its strides may overlap or leave gaps).
size_t span_bytes(const at::Tensor& t);

/// A gradd-owned copy of CUDA tensor `t` with its sizes and strides, copied
/// on the current stream: a static input of a graph. It starts `offset`
/// bytes (a multiple of its element size) into an allocation of its own.
at::Tensor static_copy(const at::Tensor& t, size_t offset = 0);

/// A copy of CUDA tensor `t` in its whole layout, storage offset included:
/// what a graph hands out where the stock engine hands out `t` itself (an
/// `autograd::grad` result may be an expanded or strided view).
at::Tensor layout_copy(const at::Tensor& t);

} // namespace gradd::cuda
