#pragma once

// A bound on a test that runs threads: a hang must fail, not stall CI.

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace gradd::test {

/// Aborts the process if not disarmed within `bound`: a hang must fail.
class watchdog {
public:
  explicit watchdog(std::chrono::seconds bound)
      : thread_([this, bound] {
          std::unique_lock lock(mutex_);
          if (!done_cv_.wait_for(lock, bound, [this] { return done_; })) {
            std::fprintf(stderr, "watchdog: the test hung\n");
            std::abort();
          }
        }) {}
  ~watchdog() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    done_cv_.notify_all();
    thread_.join();
  }

private:
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;
};

} // namespace gradd::test
