// The batched copy kernel (see batched_copy.hpp), launched as
// span_launch.hpp says; a block copies in 16-byte words when both ends are
// 16-byte aligned, in bytes otherwise.

#include "cuda/batched_copy.hpp"

#include "cuda/span_launch.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>

namespace gradd::cuda {

namespace {

__global__ void copy_spans(span_table<copy_span> table) {
  const copy_span span = table.spans[blockIdx.y];
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  auto source = reinterpret_cast<uintptr_t>(span.source);
  auto destination = reinterpret_cast<uintptr_t>(span.destination);
  if (((source | destination | span.bytes) & 15) == 0) {
    auto* from = reinterpret_cast<const uint4*>(span.source);
    auto* to = reinterpret_cast<uint4*>(span.destination);
    for (size_t i = first; i < span.bytes / 16; i += stride)
      to[i] = from[i];
  } else {
    auto* from = static_cast<const unsigned char*>(span.source);
    auto* to = static_cast<unsigned char*>(span.destination);
    for (size_t i = first; i < span.bytes; i += stride)
      to[i] = from[i];
  }
}

/// The launch batched_copy makes for `span` alone, as a kernel node's parameters.
struct one_span_launch {
  explicit one_span_launch(const copy_span& span) {
    launch_over_spans(std::vector<copy_span>{span}, [](const copy_span& s) { return s.bytes; },
                      [&](const span_table<copy_span>& t, dim3 g, size_t) {
                        table = t;
                        grid = g;
                      });
  }
  span_table<copy_span> table{};
  dim3 grid;
};

} // namespace

void batched_copy(const std::vector<copy_span>& spans, cudaStream_t stream) {
  auto bytes_of = [](const copy_span& span) { return span.bytes; };
  launch_over_spans(spans, bytes_of, [&](const span_table<copy_span>& table, dim3 grid, size_t) {
    copy_spans<<<grid, span_threads_per_block, 0, stream>>>(table);
    if (auto error = cudaGetLastError(); error != cudaSuccess)
      throw std::runtime_error(std::string("gradd batched copy: ") + cudaGetErrorString(error));
  });
}

cudaGraphNode_t captured_copy(const copy_span& span, cudaStream_t stream) {
  batched_copy({span}, stream);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaGraphNode_t* last = nullptr;
  size_t count = 0;
  auto error = cudaStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &last, nullptr, &count);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return status == cudaStreamCaptureStatusActive && count == 1 ? last[0] : nullptr;
}

cudaError_t redirect_copy(cudaGraphExec_t exec, cudaGraphNode_t node, const copy_span& span) {
  one_span_launch launch(span);
  void* arguments[] = {&launch.table};
  cudaKernelNodeParams params{};
  params.func = reinterpret_cast<void*>(&copy_spans);
  params.gridDim = launch.grid;
  params.blockDim = dim3(span_threads_per_block);
  params.kernelParams = arguments;
  if (auto error = cudaGraphExecKernelNodeSetParams(exec, node, &params); error != cudaSuccess)
    return error;
  return cudaGraphKernelNodeSetParams(node, &params);
}

} // namespace gradd::cuda
