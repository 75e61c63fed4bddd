// gradd's comparison kernel (see byte_compare_kernel.hpp), launched as
// span_launch.hpp says. A thread that finds a difference sets its span's
// flag (every writer writes 1); the flags come from the caching allocator
// and are read back once, after the last launch.

#include "cuda/byte_compare_kernel.hpp"

#include "cuda/span_launch.hpp"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>

namespace gradd::cuda {

namespace {

__global__ void compare_spans(span_table<compared_span> table, unsigned* differs) {
  const compared_span span = table.spans[blockIdx.y];
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  auto bytes = reinterpret_cast<uintptr_t>(span.bytes);
  auto other = reinterpret_cast<uintptr_t>(span.other);
  bool differ = false;
  if (((bytes | other | span.size) & 15) == 0) {
    auto* words = reinterpret_cast<const uint4*>(span.bytes);
    auto* others = reinterpret_cast<const uint4*>(span.other);
    for (size_t i = first; i < span.size / 16 && !differ; i += stride) {
      uint4 w = words[i];
      uint4 o = others ? others[i] : make_uint4(0, 0, 0, 0);
      differ = w.x != o.x || w.y != o.y || w.z != o.z || w.w != o.w;
    }
  } else {
    auto* at = static_cast<const unsigned char*>(span.bytes);
    auto* others = static_cast<const unsigned char*>(span.other);
    for (size_t i = first; i < span.size && !differ; i += stride)
      differ = at[i] != (others ? others[i] : 0);
  }
  if (differ)
    differs[blockIdx.y] = 1;
}

} // namespace

std::vector<bool> spans_differ_on_device(const std::vector<compared_span>& spans,
                                         c10::Stream stream) {
  auto cuda_stream = c10::cuda::CUDAStream(stream).stream();
  size_t flag_bytes = spans.size() * sizeof(unsigned);
  auto flags = c10::cuda::CUDACachingAllocator::get()->allocate(flag_bytes);
  auto* differs = static_cast<unsigned*>(flags.get());
  C10_CUDA_CHECK(cudaMemsetAsync(differs, 0, flag_bytes, cuda_stream));
  auto bytes_of = [](const compared_span& span) { return span.size; };
  launch_over_spans(spans, bytes_of,
                    [&](const span_table<compared_span>& table, dim3 grid, size_t begin) {
                      compare_spans<<<grid, span_threads_per_block, 0, cuda_stream>>>(
                          table, differs + begin);
                      C10_CUDA_KERNEL_LAUNCH_CHECK();
                    });
  std::vector<unsigned> found(spans.size());
  C10_CUDA_CHECK(cudaMemcpyAsync(found.data(), differs, flag_bytes, cudaMemcpyDeviceToHost,
                                 cuda_stream));
  C10_CUDA_CHECK(cudaStreamSynchronize(cuda_stream));
  return {found.begin(), found.end()};
}

} // namespace gradd::cuda
