#pragma once

// The TBB workers that run gradd's compiles, below the training threads'
// scheduling priority (policy compile.nice).

#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_scheduler_observer.h>

namespace gradd::actors {

/// While observing `arena`, lowers the priority of each TBB worker that
/// enters it by `increment` nice steps (at most to 19), once per thread.
/// A worker keeps it after it leaves: an unprivileged thread may not raise
/// its own priority again. Construct after the arena, destroy before it.
class lowered_worker_priority final : public tbb::task_scheduler_observer {
public:
  lowered_worker_priority(tbb::task_arena& arena, int increment);
  ~lowered_worker_priority() override;

  lowered_worker_priority(const lowered_worker_priority&) = delete;
  lowered_worker_priority& operator=(const lowered_worker_priority&) = delete;

  void on_scheduler_entry(bool is_worker) override;

private:
  int increment_;
};

} // namespace gradd::actors
