#pragma once

#include "actors/pipeline.hpp"
#include "engine/gradd.hpp"
#include "engine/detail/plan_table.hpp"

#include <atomic>
#include <memory>
#include <shared_mutex>

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

/// The process-wide state behind the API: settings, plan table, pipeline,
/// statistics.
class engine_state {
public:
  /// The one instance, created on first use and never destroyed (backwards on
  /// other threads may outlive static destruction).
  static engine_state& instance();

  std::shared_ptr<const settings> current_settings() const { return settings_.load(); }

  /// Installs `config` and a pipeline built for it (the old one stops first).
  void start(const settings& config);

  /// Stops the pipeline; plans stay in the table.
  void stop();

  /// Sends a captured graph to the pipeline; false if none is running.
  bool submit(uint64_t graph_id, compiler::graph node_table);

  /// Waits for the pipeline to go idle; true if there is none.
  bool wait_idle(std::chrono::milliseconds timeout);

  /// Compiles settled (since the last reset) and in flight, for statistics.
  std::pair<uint64_t, uint64_t> compile_counts() const;

  /// Zeroes the statistics.
  void reset_statistics();

  /// Counts a backward served by the stock engine, warning once per reason.
  void count_fallback(fallback_reason reason);

  plan_table table;
  counters stats;

private:
  std::atomic<std::shared_ptr<const settings>> settings_{std::make_shared<const settings>()};
  std::atomic<uint32_t> warned_reasons_{0};
  mutable std::shared_mutex pipeline_mutex_;
  std::unique_ptr<actors::pipeline> pipeline_;
  uint64_t compiles_before_ = 0;  ///< settled by earlier pipelines
  uint64_t compiles_reset_ = 0;   ///< settled before the last reset
};

} // namespace gradd::engine::detail
