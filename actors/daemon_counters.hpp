#pragma once

// What the daemon link tells the engine and the daemon: the engine's
// counters it adds to, and the process's statistics it reports.

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gradd::actors {

/// The process's statistics as (name, value) pairs (gradd::fields), which
/// the daemon link reports to the daemon.
using statistics_fields = std::vector<std::pair<std::string, uint64_t>>;

/// What the pipeline counts into the engine's statistics, which own them.
struct daemon_counters {
  std::atomic<uint64_t> plans{0};      ///< plans the daemon compiled or kept for this process
  std::atomic<uint64_t> fallbacks{0};  ///< graphs that went on without the daemon
};

} // namespace gradd::actors
