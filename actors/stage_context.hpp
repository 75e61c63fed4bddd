#pragma once

// What every pipeline stage shares: the policy, the plan table it feeds, the
// TBB arena its heavy work runs on, and the counters that let the pipeline
// drain. Owned by the pipeline, which outlives its stages and their tasks
// (a pipeline that gives up waiting for a task is leaked, never freed).

#include "actors/pipeline.hpp"
#include "config/settings.hpp"
#include "engine/detail/plan_table.hpp"

#include <oneapi/tbb/task_arena.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

namespace gradd::actors {

struct stage_context {
  settings config;
  engine::detail::plan_table* table = nullptr;
  tbb::task_arena* arena = nullptr;
  daemon_counters* counters = nullptr;
  std::function<statistics_fields()> own_statistics;  ///< for the daemon link's reports
  /// Set when the pipeline stops: no new work; work in flight is cut short.
  std::atomic<bool> stopping{false};
  /// Jobs submitted and not yet settled by the registry.
  std::atomic<uint64_t> in_flight{0};
  std::atomic<uint64_t> finished{0};
  std::mutex idle_mutex;
  std::condition_variable idle;

  /// Runs `work` on the TBB arena. `work` must not throw: a stage catches
  /// its own errors and turns them into a failed compile_result.
  template <class Work>
  void run_on_arena(Work work) {
    arena->enqueue(std::move(work));
  }

  /// Why graph `graph_id`'s compile should stop now, if it should: the
  /// pipeline stops, compile.timeout_ms has passed since the claim, or
  /// reset() dropped the record. Stages ask between their steps, so a
  /// compile never runs on long after nobody wants it.
  std::optional<std::string> interruption(uint64_t graph_id) const;

  /// Throws std::runtime_error naming the interruption, if there is one.
  void check_interruption(uint64_t graph_id) const;

  /// Called by the registry when a job has settled. The registry counts it
  /// as finished before publishing, so that statistics are current by the
  /// time a waiting backward wakes.
  void job_settled() {
    if (in_flight.fetch_sub(1) == 1) {
      std::lock_guard lock(idle_mutex);
      idle.notify_all();
    }
  }
};

} // namespace gradd::actors
