// gradd's comparison kernels (see compare_kernels.hpp), launched as
// span_launch.hpp says. A thread writes its span's result only where it
// found something: a flag of 1 (every writer writes 1), or a distance by
// atomicMax on its bits (non-negative doubles order as their bits do).
// The results come from the caching allocator and are read back once,
// after the last launch.

#include "cuda/compare_kernels.hpp"

#include "cuda/span_launch.hpp"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

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

__device__ double element(const void* values, size_t i, float_type type) {
  switch (type) {
    case float_type::f16:
      return __half2float(static_cast<const __half*>(values)[i]);
    case float_type::bf16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(values)[i]);
    case float_type::f32:
      return static_cast<const float*>(values)[i];
    default:
      return static_cast<const double*>(values)[i];
  }
}

/// What measure_spans finds in one span, zero where it found nothing.
struct span_measure {
  unsigned long long apart;  ///< the bits of the largest distance
  unsigned nan_elsewhere;
};

__global__ void measure_spans(span_table<measured_span> table, span_measure* found) {
  const measured_span span = table.spans[blockIdx.y];
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  bool mismatch = false;
  double most = 0;
  for (size_t i = first; i < span.count; i += stride) {
    double x = element(span.values, i, span.type), y = element(span.others, i, span.type);
    if (isnan(x) != isnan(y))
      mismatch = true;
    else if (!isnan(x) && x != y)
      most = fmax(most, fabs(x - y));
  }
  if (mismatch)
    found[blockIdx.y].nan_elsewhere = 1;
  if (most > 0)
    atomicMax(&found[blockIdx.y].apart, static_cast<unsigned long long>(__double_as_longlong(most)));
}

/// Device memory for `count` results of type T, zeroed on `stream`.
template <class T>
c10::DataPtr zeroed(size_t count, cudaStream_t stream) {
  auto memory = c10::cuda::CUDACachingAllocator::get()->allocate(count * sizeof(T));
  C10_CUDA_CHECK(cudaMemsetAsync(memory.get(), 0, count * sizeof(T), stream));
  return memory;
}

/// The `count` results of type T at `memory`, after the work on `stream`.
template <class T>
std::vector<T> read_back(const c10::DataPtr& memory, size_t count, cudaStream_t stream) {
  std::vector<T> host(count);
  C10_CUDA_CHECK(cudaMemcpyAsync(host.data(), memory.get(), count * sizeof(T),
                                 cudaMemcpyDeviceToHost, stream));
  C10_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

} // namespace

std::vector<bool> spans_differ_on_device(const std::vector<compared_span>& spans,
                                         c10::Stream stream) {
  auto cuda_stream = c10::cuda::CUDAStream(stream).stream();
  auto flags = zeroed<unsigned>(spans.size(), cuda_stream);
  auto* differs = static_cast<unsigned*>(flags.get());
  auto bytes_of = [](const compared_span& span) { return span.size; };
  launch_over_spans(spans, bytes_of,
                    [&](const span_table<compared_span>& table, dim3 grid, size_t begin) {
                      compare_spans<<<grid, span_threads_per_block, 0, cuda_stream>>>(
                          table, differs + begin);
                      C10_CUDA_KERNEL_LAUNCH_CHECK();
                    });
  auto found = read_back<unsigned>(flags, spans.size(), cuda_stream);
  return {found.begin(), found.end()};
}

std::vector<span_distance> spans_apart_on_device(const std::vector<measured_span>& spans,
                                                 c10::Stream stream) {
  auto cuda_stream = c10::cuda::CUDAStream(stream).stream();
  auto results = zeroed<span_measure>(spans.size(), cuda_stream);
  auto* found = static_cast<span_measure*>(results.get());
  auto bytes_of = [](const measured_span& span) { return span.count * 4; };  // blocks as for floats
  launch_over_spans(spans, bytes_of,
                    [&](const span_table<measured_span>& table, dim3 grid, size_t begin) {
                      measure_spans<<<grid, span_threads_per_block, 0, cuda_stream>>>(
                          table, found + begin);
                      C10_CUDA_KERNEL_LAUNCH_CHECK();
                    });
  auto measures = read_back<span_measure>(results, spans.size(), cuda_stream);
  std::vector<span_distance> measured(spans.size());
  for (size_t s = 0; s < spans.size(); ++s) {
    measured[s].nan_elsewhere = measures[s].nan_elsewhere != 0;
    std::memcpy(&measured[s].apart, &measures[s].apart, sizeof(double));
  }
  return measured;
}

} // namespace gradd::cuda
