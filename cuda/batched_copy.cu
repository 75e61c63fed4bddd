// The batched copy kernel (see batched_copy.hpp).
//
// The table travels by value in the kernel's parameters (160 spans, 3.8 KB,
// under the 4 KB every architecture takes), so a launch needs no upload.
// Block row y copies span y; its blocks stride over the span in 16-byte
// words when both ends are 16-byte aligned, in bytes otherwise.

#include "cuda/batched_copy.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace gradd::cuda {

namespace {

struct span_table {
  copy_span spans[spans_per_launch];
};

constexpr int threads_per_block = 256;
constexpr int max_blocks_per_span = 512;

__global__ void copy_spans(span_table table) {
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

} // namespace

void batched_copy(const std::vector<copy_span>& spans, cudaStream_t stream) {
  for (size_t begin = 0; begin < spans.size(); begin += spans_per_launch) {
    size_t count = std::min(spans_per_launch, spans.size() - begin);
    span_table table{};
    size_t largest = 0;
    for (size_t i = 0; i < count; ++i) {
      table.spans[i] = spans[begin + i];
      largest = std::max(largest, spans[begin + i].bytes);
    }
    size_t words_per_block = threads_per_block * size_t{4};
    auto blocks = static_cast<unsigned>(std::clamp<size_t>(
        (largest / 16 + words_per_block - 1) / words_per_block, 1, max_blocks_per_span));
    copy_spans<<<dim3(blocks, static_cast<unsigned>(count)), threads_per_block, 0, stream>>>(table);
    if (auto error = cudaGetLastError(); error != cudaSuccess)
      throw std::runtime_error(std::string("gradd batched copy: ") + cudaGetErrorString(error));
  }
}

} // namespace gradd::cuda
