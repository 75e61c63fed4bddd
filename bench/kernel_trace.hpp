#pragma once

// A kernel timeline of some backwards: libtorch's Kineto profiler with CUDA
// activity only (kernels, memcpys and CUDA runtime calls; no CPU operator
// events, whose recording would slow the CPU side it is meant to show).
// bench/trace_summary.py reads what it writes.

#include <functional>
#include <string>

namespace gradd::measure {

/// Runs `work` under the profiler and writes its Chrome trace to `path`;
/// throws std::runtime_error where that file cannot be written.
void record_kernel_trace(const std::string& path, const std::function<void()>& work);

} // namespace gradd::measure
