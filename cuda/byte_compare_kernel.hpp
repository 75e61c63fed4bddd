#pragma once

// The device side of byte_compare.hpp: gradd's comparison kernel, in
// byte_compare_kernel.cu where gradd is built with CUDA. Plain types, so
// byte_compare.cpp builds without the CUDA toolkit too.

#include <c10/core/Stream.h>

#include <cstddef>
#include <vector>

namespace gradd::cuda {

/// A range of bytes on the device, compared with another or, where
/// `other` is null, with zeros.
struct compared_span {
  const void* bytes;
  const void* other;
  size_t size;
};

/// Which spans differ: one kernel launch per 160 spans on `stream` (a
/// CUDA stream), then a wait for the answer. In a build without CUDA
/// kernels it throws.
std::vector<bool> spans_differ_on_device(const std::vector<compared_span>& spans,
                                         c10::Stream stream);

} // namespace gradd::cuda
