#pragma once

#include "engine/gradd.hpp"
#include "engine/detail/plan_cache.hpp"

#include <atomic>
#include <memory>

namespace gradd::engine::detail {

/// Statistics as atomics, bumped from any backward thread.
struct counters {
  std::atomic<uint64_t> backwards{0};
  std::atomic<uint64_t> plan_backwards{0};
  std::atomic<uint64_t> eager_backwards{0};
  std::array<std::atomic<uint64_t>, fallback_reason_count> eager_by_reason{};
  std::atomic<uint64_t> captures{0};
  std::atomic<uint64_t> cache_hits{0};
  std::atomic<uint64_t> cache_misses{0};

  statistics snapshot() const;
  void reset();
};

/// The process-wide state behind the API: settings, plan cache, statistics.
class engine_state {
public:
  /// The one instance, created on first use and never destroyed (backwards on
  /// other threads may outlive static destruction).
  static engine_state& instance();

  std::shared_ptr<const settings> current_settings() const { return settings_.load(); }
  void set_settings(const settings& config) {
    settings_.store(std::make_shared<const settings>(config));
  }

  /// Counts a backward served by the stock engine, warning once per reason.
  void count_fallback(fallback_reason reason);

  plan_cache cache;
  counters stats;

private:
  std::atomic<std::shared_ptr<const settings>> settings_{std::make_shared<const settings>()};
  std::atomic<uint32_t> warned_reasons_{0};
};

} // namespace gradd::engine::detail
