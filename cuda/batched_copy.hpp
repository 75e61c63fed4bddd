#pragma once

// gradd's batched copy: many device-to-device copies in one kernel launch,
// driven by a table of pointers, for a CUDA graph's copy-in. One `copy_`
// per tensor cost ~10 µs of CPU each (../shared/DESIGN.md, CUDA).

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

namespace gradd::cuda {

/// One contiguous range of bytes to copy.
struct copy_span {
  const void* source;
  void* destination;
  size_t bytes;
};

/// Copies every span on `stream`: one kernel launch per 160 spans
/// (span_launch.hpp), none for an empty list. The ranges must not overlap.
void batched_copy(const std::vector<copy_span>& spans, cudaStream_t stream);

} // namespace gradd::cuda
