#pragma once

// Peak memory of a stretch of work (a backward), on the CPU or a CUDA device.
//
// CUDA: the caching allocator's own statistics (allocated bytes, current and
// peak), reached through c10's device-generic allocator interface. CPU:
// libtorch keeps no such statistic, so install_cpu_peak_tracking() puts a
// counting allocator in front of the default one (for measurement runs only:
// it adds a small allocation of its own to every CPU allocation).

#include <c10/core/Device.h>

#include <cstdint>

namespace gradd::measure {

/// Routes every later CPU tensor allocation through a byte counter. Call once,
/// before the tensors to be measured exist. Idempotent.
void install_cpu_peak_tracking();

/// The CUDA caching allocator's peaks on `device` since its last reset.
struct device_peaks {
  int64_t allocated = 0;  ///< max_memory_allocated
  int64_t reserved = 0;   ///< max_memory_reserved: segments, graph pools included
};

/// Gives the allocator's unused cached blocks back to CUDA and resets its
/// peaks on `device` to what it holds now.
void reset_cuda_peaks(c10::Device device);

/// The peaks on `device` since reset_cuda_peaks.
device_peaks cuda_peaks(c10::Device device);

/// Measures the peak of allocated bytes above the level at construction.
class peak_memory {
public:
  /// Starts measuring on `device` (CPU needs install_cpu_peak_tracking()).
  explicit peak_memory(c10::Device device);

  /// Bytes allocated at the peak since construction, minus those allocated
  /// at construction.
  int64_t peak_above_start() const;

private:
  c10::Device device_;
  int64_t start_;
};

} // namespace gradd::measure
