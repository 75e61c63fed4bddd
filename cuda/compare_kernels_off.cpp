// The device side of tensor_compare.hpp in a build without CUDA kernels,
// where no CUDA graph is captured and so no CUDA tensor is compared.

#include "cuda/compare_kernels.hpp"

#include <stdexcept>

namespace gradd::cuda {

namespace {

[[noreturn]] void no_kernels() {
  throw std::logic_error("gradd was built without CUDA kernels: no CUDA tensors to compare");
}

} // namespace

std::vector<bool> spans_differ_on_device(const std::vector<compared_span>&, c10::Stream) {
  no_kernels();
}

std::vector<span_distance> spans_apart_on_device(const std::vector<measured_span>&, c10::Stream) {
  no_kernels();
}

} // namespace gradd::cuda
