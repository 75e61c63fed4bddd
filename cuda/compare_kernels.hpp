#pragma once

// The device side of tensor_compare.hpp: gradd's comparison kernels, in
// compare_kernels.cu where gradd is built with CUDA. Plain types, so
// tensor_compare.cpp builds without the CUDA toolkit too.

#include <c10/core/Stream.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gradd::cuda {

/// A range of bytes on the device, compared with another or, where
/// `other` is null, with zeros.
struct compared_span {
  const void* bytes;
  const void* other;
  size_t size;
};

/// The floating types the rounding measure reads.
enum class float_type : uint8_t { f16, bf16, f32, f64 };

/// Two ranges of `count` elements of one floating type on the device.
struct measured_span {
  const void* values;
  const void* others;
  size_t count;
  float_type type;
};

/// How far a measured span's two ranges are apart: the largest absolute
/// difference of elements that differ (infinite where an infinity meets
/// anything else), unless one has NaN where the other has not.
struct span_distance {
  bool nan_elsewhere = false;
  double apart = 0;
};

/// Which spans differ: one kernel launch per 160 spans on `stream` (a
/// CUDA stream), then a wait for the answer. Throws in a build without
/// CUDA kernels.
std::vector<bool> spans_differ_on_device(const std::vector<compared_span>& spans,
                                         c10::Stream stream);

/// Each span's distance, likewise.
std::vector<span_distance> spans_apart_on_device(const std::vector<measured_span>& spans,
                                                 c10::Stream stream);

} // namespace gradd::cuda
