// The kernel of staged_scale.hpp.

#include "cuda/staged_scale.hpp"

#include <stdexcept>
#include <string>

namespace gradd::test {

namespace {

__global__ void scale_through_shared(const float* x, float factor, float* out, int64_t n) {
  extern __shared__ float staged[];
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    staged[threadIdx.x] = x[i];
  __syncthreads();
  if (i < n)
    out[i] = staged[threadIdx.x] * factor;
}

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

} // namespace

void scale_staged(const float* x, float factor, float* out, int64_t n, cudaStream_t stream) {
  constexpr int threads = 256;
  limit_staging(staging_bytes);
  auto blocks = static_cast<unsigned>((n + threads - 1) / threads);
  scale_through_shared<<<blocks, threads, staging_bytes, stream>>>(x, factor, out, n);
  check(cudaGetLastError(), "scale_through_shared");
}

void limit_staging(int bytes) {
  check(cudaFuncSetAttribute(scale_through_shared, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             bytes),
        "cudaFuncSetAttribute");
}

} // namespace gradd::test
