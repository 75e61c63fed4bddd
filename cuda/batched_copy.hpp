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

/// Copies `span` on `stream`, which is capturing, by one launch of the
/// batched copy's kernel, and returns the kernel node it added (null where
/// the capture does not name it: the stream not capturing): a copy
/// whose graph instance can later write elsewhere (redirect_copy), where a
/// memcpy node's instance takes new memory only if it is mapped as its old
/// memory was (Note [Outputs shared across shapes], shared_outputs.cpp).
cudaGraphNode_t captured_copy(const copy_span& span, cudaStream_t stream);

/// Points `node`, which captured_copy added to the graph `exec` was
/// instantiated from, at `span`: the same bytes, from or to elsewhere.
/// Both the instance and the graph's node change.
cudaError_t redirect_copy(cudaGraphExec_t exec, cudaGraphNode_t node, const copy_span& span);

} // namespace gradd::cuda
