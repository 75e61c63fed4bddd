// A small program that does one lifecycle scenario and exits: the
// lifecycle tests run it as a child process, because a crash or a hang at
// exit can only be seen from outside the process.
//
//   gradd_lifecycle_child SCENARIO
//
// (Other tests use it too: `keep_plan` fills a plan cache folder.)
// Exit status: 0 when the scenario ran (the parent checks the status, the
// time it took and what was printed), 2 for an unknown scenario, 3 for the
// `exit()` scenario.

#include "gradd/gradd.hpp"

#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace {

void one_backward() {
  auto x = torch::ones({3}, torch::requires_grad());
  (x * 2).sum().backward();
}

/// A policy whose every compile would take a minute, so exit finds it in
/// flight; at debug level gradd says when it drops a compile.
gradd::settings slow_compiles() {
  gradd::settings s;
  s.compile.delay_ms = 60000;
  s.compile.timeout_ms = 120000;
  s.logging.level = gradd::log_level::debug;
  return s;
}

gradd::settings sync_settings() {
  gradd::settings s;
  s.compile.mode = gradd::compile_mode::sync;
  return s;
}

/// Starts a detached thread doing backwards until the process ends; returns
/// once it has done a few. Not in the test's table: it shows that libtorch
/// itself crashes when a thread starts backwards while the process exits,
/// on the stock engine as well (docs/design.md, Lifecycle).
void backwards_on_a_detached_thread() {
  static std::atomic<int> done{0};
  std::thread([] {
    for (;;) {
      one_backward();
      done.fetch_add(1);
    }
  }).detach();
  while (done.load() < 20)
    std::this_thread::yield();
}

/// Starts a detached thread whose backward blocks for good in a hook;
/// returns once the thread is inside that backward. (A thread that keeps
/// starting backwards while the process exits crashes libtorch itself, on
/// the stock engine too: its statics are destroyed under it.)
void backward_stuck_on_a_detached_thread() {
  static std::atomic<bool> inside{false};
  std::thread([] {
    auto x = torch::ones({3}, torch::requires_grad());
    auto y = x * 2;
    y.register_hook([](torch::Tensor grad) {
      inside = true;
      for (;;)
        std::this_thread::sleep_for(std::chrono::seconds(1));
      return grad;
    });
    y.sum().backward();
  }).detach();
  while (!inside.load())
    std::this_thread::yield();
}

const std::map<std::string, std::function<int()>>& scenarios() {
  static const auto* table = new std::map<std::string, std::function<int()>>{
      // Compiles one_backward()'s structure into the plan cache at
      // $GRADD_TEST_CACHE_DIR, for a later process to load (plan_cache_test).
      {"keep_plan",
       [] {
         auto s = sync_settings();
         s.cache.dir = std::getenv("GRADD_TEST_CACHE_DIR");
         gradd::enable(s);
         one_backward();
         return gradd::stats().plan_backwards == 1 ? 0 : 1;
       }},
      {"return_while_enabled",
       [] {
         gradd::enable();
         one_backward();
         gradd::wait_for_compiles();
         one_backward();
         return 0;
       }},
      {"exit_while_enabled",
       [] {
         gradd::enable(sync_settings());
         one_backward();
         std::exit(3);
         return 0;
       }},
      {"compile_in_flight_at_exit",
       [] {
         gradd::enable(slow_compiles());
         one_backward();
         std::cout << "in_flight=" << gradd::stats().compiles_in_flight << std::endl;
         return 0;
       }},
      {"detached_thread_in_backward",
       [] {
         gradd::enable(sync_settings());
         backward_stuck_on_a_detached_thread();
         std::cout << gradd::stats() << std::endl;
         return 0;
       }},
      // Threads wait in sync backwards for a compile that would take a
      // minute when the process exits: they must not run the stock engine
      // while libtorch's statics go (they did, and crashed in getAccelerator).
      {"exit_while_threads_wait_for_a_sync_compile",
       [] {
         auto s = slow_compiles();
         s.compile.mode = gradd::compile_mode::sync;
         gradd::enable(s);
         for (int i = 0; i < 4; ++i)
           std::thread(one_backward).detach();
         while (gradd::stats().compiles_in_flight == 0)
           std::this_thread::yield();
         std::this_thread::sleep_for(std::chrono::milliseconds(100));  // all of them waiting
         std::cout << "waiting=" << gradd::stats().cache_misses << std::endl;
         return 0;
       }},
      {"stock_backwards_through_exit",
       [] {
         backwards_on_a_detached_thread();
         return 0;
       }},
      {"disable_from_another_thread",
       [] {
         gradd::enable();
         one_backward();
         std::thread([] { gradd::disable(); }).join();
         std::cout << "enabled=" << gradd::is_enabled() << std::endl;
         return 0;
       }},
      {"enable_from_another_thread",
       [] {
         gradd::enable();
         std::thread([] { gradd::enable(sync_settings()); }).join();
         one_backward();
         std::cout << "plan_backwards=" << gradd::stats().plan_backwards << std::endl;
         return 0;
       }},
      {"guards_on_several_threads",
       [] {
         std::vector<std::thread> threads;
         for (int t = 0; t < 4; ++t)
           threads.emplace_back([] {
             for (int i = 0; i < 20; ++i) {
               gradd::enable_guard on{sync_settings()};
               one_backward();
             }
           });
         for (auto& t : threads)
           t.join();
         std::cout << "enabled=" << gradd::is_enabled() << std::endl;
         return 0;
       }},
      {"disable_while_backwards_run",
       [] {
         gradd::enable(sync_settings());
         std::atomic<bool> stop{false};
         std::vector<std::thread> workers;
         for (int t = 0; t < 3; ++t)
           workers.emplace_back([&] {
             while (!stop.load())
               one_backward();
           });
         std::this_thread::sleep_for(std::chrono::milliseconds(50));
         std::thread([] { gradd::disable(); }).join();
         stop = true;
         for (auto& w : workers)
           w.join();
         std::cout << "enabled=" << gradd::is_enabled() << std::endl;
         return 0;
       }},
      {"exit_while_disabled_after_use",
       [] {
         gradd::enable();
         one_backward();
         gradd::disable();
         return 0;
       }},
  };
  return *table;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2 || scenarios().count(argv[1]) == 0) {
    std::cerr << "usage: gradd_lifecycle_child SCENARIO\n";
    return 2;
  }
  return scenarios().at(argv[1])();
}
