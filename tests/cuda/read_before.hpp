#pragma once

// A kernel for tests/cuda/kernel_arguments_test.cpp: it is handed its input's
// address moved back before the input's first element, as a kernel with a
// padding may be, and reads the input from there.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace gradd::test {

/// out[i] = x[i] * factor for i < n, launched on `stream` with `x - skip`
/// as its argument.
void scale_through_earlier_pointer(const float* x, int64_t skip, float factor, float* out,
                                   int64_t n, cudaStream_t stream);

} // namespace gradd::test
