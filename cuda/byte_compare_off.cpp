// The device side of byte_compare.hpp in a build without CUDA kernels,
// where no CUDA graph is captured and so no CUDA tensor is compared.

#include "cuda/byte_compare_kernel.hpp"

#include <stdexcept>

namespace gradd::cuda {

std::vector<bool> spans_differ_on_device(const std::vector<compared_span>&, c10::Stream) {
  throw std::logic_error("gradd was built without CUDA kernels: no CUDA tensors to compare");
}

} // namespace gradd::cuda
