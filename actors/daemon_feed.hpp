#pragma once

// What the daemon link tells the engine and the daemon: the engine's
// counters it adds to, the daemon's cache.dir, and the process's
// statistics it reports.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gradd::actors {

/// The process's statistics as (name, value) pairs (gradd::fields), which
/// the daemon link reports to the daemon.
using statistics_fields = std::vector<std::pair<std::string, uint64_t>>;

/// The most names one report may hold: the daemon refuses a longer one.
constexpr size_t max_report_names = 256;

/// What the daemon link feeds the engine, which owns it.
struct daemon_feed {
  std::atomic<uint64_t> plans{0};      ///< plans the daemon compiled or kept for this process
  std::atomic<uint64_t> fallbacks{0};  ///< graphs that went on without the daemon
  /// The welcoming daemon's cache.dir, absolute ("" for none): a miss
  /// loads a plan the daemon kept there without asking it (Note [Warm
  /// start from the daemon's cache]). Null until a daemon welcomed us.
  std::atomic<std::shared_ptr<const std::string>> cache_dir;
};

} // namespace gradd::actors
