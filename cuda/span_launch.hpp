#pragma once

// How gradd's span kernels are launched (batched_copy.cu,
// compare_kernels.cu). The spans travel by value in the kernel's
// parameters, spans_per_launch at a time (24 bytes each: 3.8 KB, under the
// 4 KB every architecture takes), so a launch needs no upload. Block row y
// works on span y; its blocks stride over the span in 16-byte words.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace gradd::cuda {

inline constexpr size_t spans_per_launch = 160;
inline constexpr int span_threads_per_block = 256;

/// One launch's spans, by value.
template <class Span>
struct span_table {
  Span spans[spans_per_launch];
};

/// Calls `launch(table, grid, begin)` for each spans_per_launch of
/// `spans`, from `begin` on: one block row per span, and blocks enough for
/// the largest (`bytes_of(span)`), up to 512 per row.
template <class Span, class BytesOf, class Launch>
void launch_over_spans(const std::vector<Span>& spans, BytesOf bytes_of, Launch launch) {
  constexpr size_t words_per_block = span_threads_per_block * size_t{4};
  constexpr size_t max_blocks_per_span = 512;
  for (size_t begin = 0; begin < spans.size(); begin += spans_per_launch) {
    size_t count = std::min(spans_per_launch, spans.size() - begin);
    span_table<Span> table{};
    size_t largest = 0;
    for (size_t i = 0; i < count; ++i) {
      table.spans[i] = spans[begin + i];
      largest = std::max(largest, bytes_of(spans[begin + i]));
    }
    auto blocks = std::clamp<size_t>((largest / 16 + words_per_block - 1) / words_per_block, 1,
                                     max_blocks_per_span);
    launch(table, dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(count)), begin);
  }
}

} // namespace gradd::cuda
