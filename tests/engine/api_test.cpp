// The in-process API: enabling, nesting, reset and statistics.

#include "engine/grad_check.hpp"

namespace {

void one_backward() {
  auto x = torch::ones({3}, torch::requires_grad());
  (x * 2).sum().backward();
}

} // namespace

TEST_CASE("guards nest: inner scopes restore the outer state", "[engine][api]") {
  REQUIRE(!gradd::is_enabled());
  {
    gradd::enable_guard outer{gradd::test::sync_settings()};
    CHECK(gradd::is_enabled());
    {
      gradd::disable_guard inner;
      CHECK(!gradd::is_enabled());
      {
        gradd::enable_guard innermost{gradd::test::force_eager_settings()};
        CHECK(gradd::is_enabled());
      }
      CHECK(!gradd::is_enabled());
    }
    CHECK(gradd::is_enabled());
  }
  CHECK(!gradd::is_enabled());
}

TEST_CASE("an inner enable's settings end with its scope", "[engine][api]") {
  gradd::reset();
  gradd::enable_guard outer{gradd::test::sync_settings()};
  {
    gradd::enable_guard inner{gradd::test::force_eager_settings()};
    one_backward();
  }
  one_backward();
  auto s = gradd::stats();
  CHECK(s.eager_for(gradd::fallback_reason::force_eager) == 1);
  CHECK(s.plan_backwards == 1);
}

TEST_CASE("disabled gradd sees no backward", "[engine][api]") {
  gradd::reset();
  one_backward();
  CHECK(gradd::stats().backwards == 0);
}

TEST_CASE("statistics count hits, misses and captures; reset clears them", "[engine][api]") {
  gradd::reset();
  {
    gradd::enable_guard on{gradd::test::sync_settings()};
    for (int i = 0; i < 3; ++i)
      one_backward();
  }
  auto s = gradd::stats();
  CHECK(s.backwards == 3);
  CHECK(s.plan_backwards == 3);
  CHECK(s.cache_misses == 1);
  CHECK(s.cache_hits == 2);
  CHECK(s.captures == 1);
  CHECK(s.plans == 1);
  std::ostringstream line;
  line << s;
  CHECK_THAT(line.str(), Catch::Contains("plan_backwards=3"));
  gradd::reset();
  s = gradd::stats();
  CHECK(s.backwards == 0);
  CHECK(s.plans == 0);
}

TEST_CASE("a structure recorded in another sequence order gets its own plan",
          "[engine][api]") {
  // Same graph shape, but the two branches' forward ops run in swapped
  // order, so the stock engine's ready queue visits them in swapped order.
  torch::manual_seed(5);
  auto a = torch::randn({4}, torch::kFloat64).requires_grad_();
  auto b = torch::randn({4}, torch::kFloat64).requires_grad_();
  auto step = [&](bool swapped) {
    gradd::test::clear_grads({a, b});
    torch::Tensor left, right;
    if (swapped) {
      right = b.exp();
      left = a.sin();
    } else {
      left = a.sin();
      right = b.exp();
    }
    (left * right).sum().backward();
    return gradd::test::grads_of({a, b});
  };
  gradd::reset();
  for (bool swapped : {false, true, false, true}) {
    auto stock = step(swapped);
    gradd::enable_guard on{gradd::test::sync_settings()};
    gradd::test::require_bitwise_equal(stock, step(swapped));
  }
  auto s = gradd::stats();
  CHECK(s.cache_misses == 2);
  CHECK(s.plans == 2);
  CHECK(s.plan_backwards == 4);
}
