// The asynchronous pipeline seen from the API: backwards never wait for a
// compile (unless the policy says sync), plans take over once ready, each
// structure compiles once, the cache stays within its bound, and disabling
// with compiles in flight is clean.

#include "engine/grad_check.hpp"

#include <atomic>
#include <barrier>
#include <thread>

namespace {

using gradd::test::grads_of;
using gradd::test::require_bitwise_equal;
using torch::Tensor;

gradd::settings async_settings(uint32_t delay_ms = 0) {
  gradd::settings s;
  s.compile.delay_ms = delay_ms;
  return s;
}

/// A tanh MLP whose depth is its structure.
struct variable_depth {
  explicit variable_depth(int max_depth, int width = 8) {
    torch::manual_seed(1);
    for (int i = 0; i < max_depth; ++i)
      weights.push_back(torch::randn({width, width}, torch::kFloat64).requires_grad_());
    x = torch::randn({4, width}, torch::kFloat64);
  }
  /// Back-propagates the first `depth` layers and returns the `.grad` of all.
  std::vector<Tensor> step(int depth) {
    gradd::test::clear_grads(weights);
    auto h = x;
    for (int i = 0; i < depth; ++i)
      h = torch::tanh(h.mm(weights[i]));
    h.pow(2).sum().backward();
    return grads_of(weights);
  }
  /// The same step on the stock engine.
  std::vector<Tensor> stock_step(int depth) {
    gradd::disable_guard off;
    return step(depth);
  }
  std::vector<Tensor> weights;
  Tensor x;
};

} // namespace

TEST_CASE("a new graph runs on the stock engine while its plan compiles", "[actors]") {
  variable_depth model(3);
  auto expected = model.stock_step(3);
  gradd::reset();
  gradd::enable_guard on{async_settings(1000)};
  require_bitwise_equal(expected, model.step(3));  // miss: eager now
  require_bitwise_equal(expected, model.step(3));  // still compiling: eager
  REQUIRE(gradd::wait_for_compiles());
  require_bitwise_equal(expected, model.step(3));  // the plan
  auto s = gradd::stats();
  CHECK(s.eager_for(gradd::fallback_reason::compile_pending) == 2);
  CHECK(s.plan_backwards == 1);
  CHECK(s.captures == 1);
  auto graphs = gradd::graph_stats();
  REQUIRE(graphs.size() == 1);
  CHECK(graphs[0].state == gradd::graph_state::ready);
  CHECK(graphs[0].pending_backwards == 2);
  CHECK(graphs[0].hits == 1);
  CHECK(graphs[0].compiles == 1);
  CHECK(graphs[0].compile_ms >= 1000);
}

TEST_CASE("sync mode serves the first backward with its plan", "[actors]") {
  variable_depth model(2);
  auto expected = model.stock_step(2);
  gradd::reset();
  gradd::enable_guard on{gradd::test::sync_settings()};
  require_bitwise_equal(expected, model.step(2));
  CHECK(gradd::stats().plan_backwards == 1);
  CHECK(gradd::stats().eager_backwards == 0);
}

TEST_CASE("concurrent misses of one structure compile once", "[actors]") {
  constexpr int threads = 4;
  std::vector<variable_depth> models;
  for (int t = 0; t < threads; ++t)
    models.emplace_back(3);
  auto expected = models[0].stock_step(3);
  gradd::reset();
  gradd::enable_guard on{async_settings(1000)};
  std::barrier start(threads);
  std::vector<std::thread> workers;
  std::vector<std::vector<Tensor>> results(threads);
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      start.arrive_and_wait();
      results[t] = models[t].step(3);
    });
  for (auto& w : workers)
    w.join();
  for (const auto& r : results)
    require_bitwise_equal(expected, r);
  REQUIRE(gradd::wait_for_compiles());
  auto s = gradd::stats();
  CHECK(s.captures == 1);
  CHECK(s.compiles == 1);
  CHECK(s.eager_backwards == threads);
}

TEST_CASE("a model cycling through structures compiles each once", "[actors]") {
  variable_depth model(4);
  std::vector<std::vector<Tensor>> expected;
  for (int depth = 1; depth <= 4; ++depth)
    expected.push_back(model.stock_step(depth));
  gradd::reset();
  gradd::enable_guard on{async_settings()};
  for (int round = 0; round < 5; ++round) {
    for (int depth = 1; depth <= 4; ++depth)
      require_bitwise_equal(expected[depth - 1], model.step(depth));
    REQUIRE(gradd::wait_for_compiles());
  }
  auto s = gradd::stats();
  CHECK(s.compiles == 4);
  CHECK(s.captures == 4);
  CHECK(s.plans == 4);
  CHECK(s.plan_backwards == 16);  // every round after the first
}

TEST_CASE("the cache keeps at most cache.max_plans plans", "[actors]") {
  variable_depth model(5);
  auto policy = gradd::test::sync_settings();
  policy.cache.max_plans = 2;
  gradd::reset();
  gradd::enable_guard on{policy};
  for (int round = 0; round < 2; ++round)
    for (int depth = 1; depth <= 5; ++depth) {
      model.step(depth);
      CHECK(gradd::stats().plans <= 2);
    }
  CHECK(gradd::stats().compiles == 10);  // LRU over a cycle of 5: every one evicted
}

TEST_CASE("a running plan is not evicted by backwards inside its hooks", "[actors]") {
  // Outer backward: a hook runs three other structures' backwards (re-entrant
  // backwards, as the stock engine allows), each compiled synchronously with
  // room for one plan; the outer plan is running, so they must not evict it.
  variable_depth inner(3);
  torch::manual_seed(2);
  auto w = torch::randn({6, 6}, torch::kFloat64).requires_grad_();
  auto outer_step = [&](bool with_inner) {
    w.mutable_grad() = Tensor();
    auto h = torch::sin(w.mm(w));
    if (with_inner)
      h.register_hook([&](Tensor g) {
        torch::AutoGradMode grad_on(true);  // hooks run with grad mode off
        for (int depth = 1; depth <= 3; ++depth)
          inner.step(depth);
        return g;
      });
    h.sum().backward();
    return grads_of({w});
  };
  auto expected = [&] {
    gradd::disable_guard off;
    return outer_step(false);
  }();
  auto policy = gradd::test::sync_settings();
  policy.cache.max_plans = 1;
  gradd::reset();
  gradd::enable_guard on{policy};
  require_bitwise_equal(expected, outer_step(true));
  auto s = gradd::stats();
  CHECK(s.backwards == 4);
  CHECK(s.plan_backwards == 4);
  // Each inner plan was evicted as soon as it was published (room for one
  // plan, held by the running outer one); the outer plan (5 nodes) stayed.
  auto graphs = gradd::graph_stats();
  REQUIRE(graphs.size() == 1);
  CHECK(graphs[0].nodes == 5);
  CHECK(graphs[0].hits == 1);
  CHECK(gradd::stats().compiles == 4);
}

TEST_CASE("8 threads train separate models concurrently without deadlock", "[actors]") {
  constexpr int threads = 8;
  constexpr int iterations = 200;
  std::vector<variable_depth> models;
  std::vector<std::vector<Tensor>> expected;
  for (int t = 0; t < threads; ++t) {
    models.emplace_back(1 + t % 3, 4);
    expected.push_back(models[t].stock_step(1 + t % 3));
  }
  gradd::reset();
  gradd::enable_guard on{async_settings()};
  std::atomic<int> mismatches{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      at::set_num_threads(1);
      for (int i = 0; i < iterations; ++i) {
        auto got = models[t].step(1 + t % 3);
        for (size_t k = 0; k < got.size(); ++k)
          if (got[k].defined() != expected[t][k].defined()
              || (got[k].defined() && !torch::equal(got[k], expected[t][k])))
            ++mismatches;
      }
    });
  for (auto& w : workers)
    w.join();
  CHECK(mismatches == 0);
  auto s = gradd::stats();
  CHECK(s.backwards == threads * iterations);
  CHECK(s.plan_backwards + s.eager_backwards == threads * iterations);
  CHECK(s.compiles <= 3);
  // Once compiled, every thread's backward is a plan's.
  REQUIRE(gradd::wait_for_compiles());
  for (int t = 0; t < threads; ++t)
    require_bitwise_equal(expected[t], models[t].step(1 + t % 3));
  CHECK(gradd::stats().plan_backwards == s.plan_backwards + threads);
}

TEST_CASE("disabling with compiles in flight finishes cleanly", "[actors]") {
  variable_depth model(2);
  auto expected = model.stock_step(2);
  gradd::reset();
  auto start = std::chrono::steady_clock::now();
  {
    gradd::enable_guard on{async_settings(60000)};
    require_bitwise_equal(expected, model.step(2));
    CHECK(gradd::stats().compiles_in_flight == 1);
  }  // disable: the minute-long test delay is cut short
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  auto s = gradd::stats();
  CHECK(s.compiles_in_flight == 0);
  CHECK(s.plans == 0);
  CHECK(gradd::graph_stats().empty());  // interrupted, not failed: nothing kept
  gradd::enable_guard again{async_settings()};
  require_bitwise_equal(expected, model.step(2));  // compiles again
  REQUIRE(gradd::wait_for_compiles());
  require_bitwise_equal(expected, model.step(2));
  s = gradd::stats();
  CHECK(s.plan_backwards == 1);
  CHECK(s.eager_for(gradd::fallback_reason::compile_error) == 0);
}

TEST_CASE("a bad policy file is refused before any backward runs", "[actors][config]") {
  CHECK_THROWS_AS(gradd::enable("/no/such/gradd.yaml"), gradd::config_error);
  CHECK(!gradd::is_enabled());
}
