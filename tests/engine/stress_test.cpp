// Backwards on several threads while another thread changes gradd's mode
// every way the API allows: enable, disable, both guards, reset, waits.
// Every gradient stays bitwise the stock engine's, nothing hangs (a
// watchdog aborts the run past its bound), and the counters add up.

#include "engine/grad_check.hpp"
#include "watchdog.hpp"

#include <atomic>
#include <random>
#include <thread>

namespace {

using torch::Tensor;

/// A float32 MLP with a tensor hook, its depth set per worker.
struct worker_model {
  explicit worker_model(int depth) {
    torch::manual_seed(depth);
    for (int i = 0; i < depth; ++i)
      weights.push_back(torch::randn({6, 6}).requires_grad_());
    x = torch::randn({5, 6});
  }
  std::vector<Tensor> step() {
    gradd::test::clear_grads(weights);
    auto h = x;
    for (const auto& w : weights)
      h = torch::tanh(h.mm(w));
    h.register_hook([](Tensor g) { return g * 2; });
    h.pow(2).sum().backward();
    return gradd::test::grads_of(weights);
  }
  std::vector<Tensor> weights;
  Tensor x;
};

gradd::settings mode_settings(int which) {
  gradd::settings s;
  s.compile.mode = which % 2 == 0 ? gradd::compile_mode::async : gradd::compile_mode::sync;
  s.compile.delay_ms = which % 3 == 0 ? 5 : 0;
  s.cache.max_plans = which % 4 == 0 ? 1 : 256;
  return s;
}

} // namespace

TEST_CASE("backwards stay exact while other threads switch gradd every way",
          "[engine][lifecycle]") {
  constexpr int workers = 3;
  constexpr int backwards_each = 150;
  constexpr int switches = 150;
  std::vector<worker_model> models;
  std::vector<std::vector<Tensor>> expected;
  for (int w = 0; w < workers; ++w) {
    models.emplace_back(2 + w);
    expected.push_back(models[w].step());  // gradd is off: the stock engine
  }
  gradd::reset();
  gradd::test::watchdog guard{std::chrono::seconds(240)};
  std::atomic<int> mismatches{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w)
    threads.emplace_back([&, w] {
      at::set_num_threads(1);
      for (int i = 0; i < backwards_each; ++i) {
        auto got = models[w].step();
        for (size_t k = 0; k < got.size(); ++k)
          if (!torch::equal(got[k], expected[w][k]))
            ++mismatches;
      }
    });
  std::thread control([&] {
    std::mt19937 random(7);
    for (int i = 0; i < switches; ++i) {
      switch (random() % 6) {
        case 0: gradd::enable(mode_settings(static_cast<int>(random() % 8))); break;
        case 1: gradd::disable(); break;
        case 2: {
          gradd::enable_guard on{mode_settings(static_cast<int>(random() % 8))};
          std::this_thread::sleep_for(std::chrono::milliseconds(random() % 3));
          break;
        }
        case 3: {
          gradd::disable_guard off;
          std::this_thread::sleep_for(std::chrono::milliseconds(random() % 3));
          break;
        }
        case 4: gradd::reset(); break;
        case 5: gradd::wait_for_compiles(std::chrono::milliseconds(50)); break;
      }
    }
    done = true;
  });
  // A second thread nests guards of its own, ending them in its own order.
  std::thread nesting([&] {
    while (!done.load()) {
      gradd::enable_guard on{mode_settings(1)};
      gradd::disable_guard off;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  for (auto& t : threads)
    t.join();
  control.join();
  nesting.join();
  gradd::disable();
  CHECK(mismatches == 0);
  CHECK(gradd::wait_for_compiles(std::chrono::seconds(10)));
  CHECK(gradd::stats().raised_backwards == 0);
  // Under gradd at the end, from a clean state: plans serve, counted once.
  gradd::reset();
  gradd::enable_guard on{gradd::test::sync_settings()};
  for (int w = 0; w < workers; ++w)
    gradd::test::require_bitwise_equal(expected[w], models[w].step());
  auto s = gradd::stats();
  CHECK(s.plan_backwards == workers);
  CHECK(s.backwards == s.plan_backwards + s.eager_backwards + s.raised_backwards);
}
