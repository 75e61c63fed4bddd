// Lowering the compile workers' priority (see worker_priority.hpp).
//
// A compile runs beside the backward that found its graph, on a core the
// training process may be using: its intra-op threads take every core by
// default. At equal priority the kernel shares that core between a compile
// worker and an intra-op thread, and the parallel region waits for its
// slowest thread. On the 2-core VM that made a new structure's stock
// backward up to 3.9 times the stock engine's slowest (gradd-bench --device
// cpu --structures sweep, stall_ratio; README, Benchmarks). With the worker
// at a higher nice value the kernel gives the training threads the core and
// the compile the time they leave.
//
// Linux keeps a nice value per thread; setpriority on a thread id changes
// that thread alone.

#include "actors/worker_priority.hpp"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace gradd::actors {

lowered_worker_priority::lowered_worker_priority(tbb::task_arena& arena, int increment)
    : tbb::task_scheduler_observer(arena), increment_(increment) {
  observe(true);
}

lowered_worker_priority::~lowered_worker_priority() { observe(false); }

void lowered_worker_priority::on_scheduler_entry(bool is_worker) {
  thread_local bool lowered = false;
  if (!is_worker || lowered)
    return;
  lowered = true;
  auto thread = static_cast<id_t>(::syscall(SYS_gettid));
  errno = 0;
  int nice = ::getpriority(PRIO_PROCESS, thread);  // -1 is a valid nice value
  if (errno != 0)
    return;
  ::setpriority(PRIO_PROCESS, thread, std::min(nice + increment_, 19));
}

} // namespace gradd::actors
