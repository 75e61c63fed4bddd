#pragma once

// What gradd-bench's timings share: milliseconds on the steady clock, and
// the median of a run of them.

#include <algorithm>
#include <chrono>
#include <vector>

namespace gradd::measure {

/// Milliseconds from `start` to now.
inline double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

/// The middle value of `values` (the upper one of an even count).
inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

} // namespace gradd::measure
