#pragma once

#include "actors/pipeline.hpp"
#include "engine/plan_table.hpp"
#include "engine/table_sink.hpp"
#include "gradd/gradd.hpp"

#include <atomic>
#include <memory>
#include <shared_mutex>

namespace gradd::engine {

/// Statistics as atomics, bumped from any backward thread.
struct counters {
  std::atomic<uint64_t> backwards{0};
  std::atomic<uint64_t> plan_backwards{0};
  std::atomic<uint64_t> eager_backwards{0};
  std::atomic<uint64_t> raised_backwards{0};
  std::array<std::atomic<uint64_t>, fallback_reason_count> eager_by_reason{};
  std::atomic<uint64_t> captures{0};
  std::atomic<uint64_t> plans_loaded{0};
  std::atomic<uint64_t> cache_hits{0};
  std::atomic<uint64_t> cache_misses{0};
  actors::daemon_feed daemon;

  statistics snapshot() const;
  void reset();
};

// Note [Policy changes and cached plans]
// Plans stay cached across disable/enable and across policy changes: a
// guard that steps out for one backward, or a scope with other fallback or
// logging settings, must not throw compiled work away. But a plan is the
// product of the passes that ran on its graph, so a policy with other passes
// (passes.pipeline, passes.gradient_ready) must not be served by it. Those
// settings are part of the structural key: under other passes a structure
// is another variant, compiled for them, and the first policy's plans are
// there again when it comes back (until the LRU cache evicts them).

/// The settings backwards are served with, and the key word of the part of
/// them that shapes a plan, computed once when they are installed rather
/// than in every backward.
struct serving_policy {
  explicit serving_policy(std::shared_ptr<const settings> config);

  std::shared_ptr<const settings> config;
  uint64_t plan_variant;  ///< Note [Policy changes and cached plans]
};

/// The process-wide state behind the API: settings, plan table, pipeline,
/// statistics.
class engine_state {
public:
  /// The one instance, created on first use and never destroyed (backwards on
  /// other threads may outlive static destruction).
  static engine_state& instance();

  /// The policy backwards are served with. Thread-safe.
  std::shared_ptr<const serving_policy> current_policy() const { return policy_.load(); }

  /// Serves later backwards with `config`. Thread-safe; callers are
  /// serialized (lifecycle.cpp).
  void use_settings(const std::shared_ptr<const settings>& config);

  /// Runs a pipeline built for `config`: keeps the running one if it was
  /// built for this very object, else stops it and starts another.
  void start(const std::shared_ptr<const settings>& config);

  /// Stops the pipeline; plans stay in the table.
  void stop();

  /// At process exit: interrupts the compiles in flight and waits at most
  /// `grace` for them, without touching an actor (CAF's statics may be gone).
  void drain_at_exit(std::chrono::milliseconds grace);

  /// Whether the process has begun to exit (drain_at_exit).
  bool exiting() const noexcept { return exiting_.load(); }

  /// Sends a captured graph to the pipeline; false if none is running.
  bool submit(uint64_t graph_id, compiler::graph node_table);

  /// Sends this rank's proposal of when graph `graph_id` switches to its
  /// plan to the pipeline's daemon link (Note [Agreement across ranks]).
  /// False where none can take it.
  bool propose(uint64_t graph_id, uint64_t proposal);

  /// Waits for the pipeline to go idle; true if there is none. Does not
  /// hold up a concurrent stop.
  bool wait_idle(std::chrono::milliseconds timeout);

  /// Compiles settled (since the last reset) and in flight, for statistics.
  std::pair<uint64_t, uint64_t> compile_counts() const;

  /// Zeroes the statistics.
  void reset_statistics();

  /// Warns, once per reason, that a backward goes to the stock engine.
  void warn_fallback(fallback_reason reason);

  /// Counts a backward the stock engine served.
  void count_fallback(fallback_reason reason);

  plan_table table;
  counters stats;

private:
  table_sink sink_{table};  ///< the pipeline's view of the table
  std::atomic<std::shared_ptr<const serving_policy>> policy_{
      std::make_shared<const serving_policy>(std::make_shared<const settings>())};
  std::atomic<uint32_t> warned_reasons_{0};
  std::atomic<bool> exiting_{false};
  mutable std::shared_mutex pipeline_mutex_;
  std::shared_ptr<actors::pipeline> pipeline_;
  std::shared_ptr<const settings> pipeline_settings_;  ///< what pipeline_ was built for
  uint64_t compiles_before_ = 0;  ///< settled by earlier pipelines
  uint64_t compiles_reset_ = 0;   ///< settled before the last reset
};

} // namespace gradd::engine
