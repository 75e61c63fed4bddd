#pragma once

// A kernel for tests/cuda/kernel_arguments_test.cpp that asks for more
// dynamic shared memory than a kernel may use by default (48 KiB), so its
// launcher raises the kernel's limit before each launch, as cuDNN's do.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace gradd::test {

/// The dynamic shared memory each launch of the kernel asks for.
constexpr int staging_bytes = 64 * 1024;

/// out[i] = x[i] * factor for i < n, staged through shared memory; sets
/// the kernel's limit to `staging_bytes` first, then launches on `stream`.
void scale_staged(const float* x, float factor, float* out, int64_t n, cudaStream_t stream);

/// Sets the kernel's dynamic shared memory limit, as a smaller launch of
/// the same library would.
void limit_staging(int bytes);

} // namespace gradd::test
