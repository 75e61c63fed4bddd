// The kernel of read_before.hpp.

#include "cuda/read_before.hpp"

#include <stdexcept>
#include <string>

namespace gradd::test {

namespace {

__global__ void scale_from_before(const float* before, int64_t skip, float factor, float* out,
                                  int64_t n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = before[skip + i] * factor;
}

} // namespace

void scale_through_earlier_pointer(const float* x, int64_t skip, float factor, float* out,
                                   int64_t n, cudaStream_t stream) {
  constexpr int threads = 256;
  auto blocks = static_cast<unsigned>((n + threads - 1) / threads);
  scale_from_before<<<blocks, threads, 0, stream>>>(x - skip, skip, factor, out, n);
  if (auto status = cudaGetLastError(); status != cudaSuccess)
    throw std::runtime_error(std::string("scale_from_before: ") + cudaGetErrorString(status));
}

} // namespace gradd::test
