// The in-process API: enabling, nesting, reset and statistics.

#include "engine/grad_check.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

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

namespace {

/// The settings a scope runs with, told apart by their compile.threads.
gradd::settings tagged_settings(uint32_t tag, bool force_eager = false) {
  auto s = force_eager ? gradd::test::force_eager_settings() : gradd::test::sync_settings();
  s.compile.threads = tag;
  return s;
}

/// A structure no other test builds: `depth` chained sines.
void chain_backward(int depth) {
  auto x = torch::ones({3}, torch::requires_grad());
  auto h = x;
  for (int i = 0; i < depth; ++i)
    h = h.sin();
  h.sum().backward();
}

} // namespace

TEST_CASE("a disable_guard between enable_guards restores the outer scope exactly",
          "[engine][api]") {
  gradd::reset();
  gradd::enable_guard outer{tagged_settings(2)};
  {
    gradd::disable_guard off;
    {
      gradd::enable_guard inner{tagged_settings(3, true)};
      one_backward();
    }
    CHECK(!gradd::is_enabled());
    one_backward();  // the stock engine, untouched
  }
  REQUIRE(gradd::is_enabled());
  // The outer settings serve (not the inner force_eager), and a new
  // structure compiles: the pipeline is back, built for them.
  chain_backward(7);
  chain_backward(7);
  auto s = gradd::stats();
  CHECK(s.backwards == 3);
  CHECK(s.eager_for(gradd::fallback_reason::force_eager) == 1);
  CHECK(s.eager_for(gradd::fallback_reason::compile_error) == 0);
  CHECK(s.plan_backwards == 2);
  CHECK(s.compiles == 1);
}

TEST_CASE("guards ending out of order leave the mode set outside them", "[engine][api]") {
  gradd::reset();
  REQUIRE(!gradd::is_enabled());
  auto first = std::make_unique<gradd::enable_guard>(tagged_settings(2, true));
  auto second = std::make_unique<gradd::disable_guard>();
  auto third = std::make_unique<gradd::enable_guard>(tagged_settings(3));
  first.reset();  // the outermost ends first: the innermost still applies
  CHECK(gradd::is_enabled());
  one_backward();
  CHECK(gradd::stats().plan_backwards == 1);
  third.reset();  // now the disable_guard is innermost
  CHECK(!gradd::is_enabled());
  second.reset();
  CHECK(!gradd::is_enabled());
  one_backward();
  CHECK(gradd::stats().backwards == 1);
}

TEST_CASE("enable inside a guard lasts as long as the guard", "[engine][api]") {
  gradd::reset();
  {
    gradd::enable_guard on{tagged_settings(2)};
    gradd::enable(tagged_settings(3, true));
    one_backward();
  }
  CHECK(!gradd::is_enabled());
  CHECK(gradd::stats().eager_for(gradd::fallback_reason::force_eager) == 1);
}

TEST_CASE("reset wakes a backward waiting for its compile", "[engine][api]") {
  gradd::reset();
  auto s = gradd::test::sync_settings();
  s.compile.delay_ms = 20000;
  s.compile.timeout_ms = 30000;
  gradd::enable_guard on{s};
  std::chrono::steady_clock::duration waited{};
  std::thread backward([&] {
    auto start = std::chrono::steady_clock::now();
    chain_backward(5);
    waited = std::chrono::steady_clock::now() - start;
  });
  while (gradd::stats().compiles_in_flight == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  gradd::reset();
  backward.join();
  CHECK(waited < std::chrono::seconds(5));
  CHECK(gradd::wait_for_compiles(std::chrono::seconds(5)));
  auto after = gradd::stats();
  CHECK(after.eager_for(gradd::fallback_reason::compile_pending) == 1);
  CHECK(after.eager_for(gradd::fallback_reason::compile_error) == 0);
}

TEST_CASE("an async miss sends its compile once the stock engine has served it",
          "[engine][api]") {
  gradd::reset();
  gradd::settings s;  // compile.mode async, the default
  s.compile.delay_ms = 300;  // keeps the compile in flight after the backward
  gradd::enable_guard on{s};
  auto x = torch::ones({3}, torch::requires_grad());
  auto y = x * 2;
  int64_t in_flight_inside = -1;
  y.register_hook([&](torch::Tensor g) {
    in_flight_inside = static_cast<int64_t>(gradd::stats().compiles_in_flight);
    return g;
  });
  y.sum().backward();
  // Note [Compile after the first backward]: nothing was sent while the
  // stock engine ran; it was sent before the backward returned.
  CHECK(in_flight_inside == 0);
  CHECK(gradd::stats().compiles_in_flight == 1);
  CHECK(gradd::stats().eager_for(gradd::fallback_reason::compile_pending) == 1);
  CHECK(gradd::wait_for_compiles(std::chrono::seconds(10)));
  CHECK(gradd::stats().compiles == 1);
}

TEST_CASE("backwards add up: served by a plan, by the stock engine, or raised",
          "[engine][api]") {
  gradd::reset();
  gradd::enable_guard on{gradd::test::sync_settings()};
  auto x = torch::ones({3}, torch::requires_grad());
  auto backward = [&](bool fail) {
    auto y = x * 3;
    y.register_hook([fail](torch::Tensor g) {
      if (fail)
        throw std::runtime_error("hook failed");
      return g;
    });
    y.sum().backward();
  };
  backward(false);  // compiles, then its plan serves
  CHECK_THROWS_WITH(backward(true), Catch::Contains("hook failed"));  // from the plan
  {
    gradd::enable_guard eager{gradd::test::force_eager_settings()};
    CHECK_THROWS_WITH(backward(true), Catch::Contains("hook failed"));  // from the stock engine
    backward(false);
  }
  backward(false);
  // A saved tensor modified in place: the node raises inside the plan.
  auto w = torch::ones({3}, torch::requires_grad());
  auto modified = [&] {
    auto h = w * 2;
    auto y = h.sin();  // saves h
    h.add_(1);
    y.sum().backward();
  };
  for (int i = 0; i < 2; ++i)  // the first compiles, then its plan raises too
    CHECK_THROWS_WITH(modified(), Catch::Contains("modified by an inplace operation"));
  auto s = gradd::stats();
  CHECK(s.backwards == 7);
  CHECK(s.plan_backwards == 2);
  CHECK(s.eager_backwards == 1);
  CHECK(s.raised_backwards == 4);
  CHECK(s.backwards == s.plan_backwards + s.eager_backwards + s.raised_backwards);
}

TEST_CASE("a compile over compile.timeout_ms is cut short and its policy applies",
          "[engine][api]") {
  auto slow = [](gradd::compile_error_policy on_error) {
    gradd::settings s;
    s.compile.delay_ms = 60000;  // would take a minute
    s.compile.timeout_ms = 200;
    s.fallback.on_compile_error = on_error;
    s.fallback.retry_after_ms = 0;
    return s;
  };
  SECTION("never_retry: the stock engine serves the structure for good") {
    gradd::reset();
    gradd::enable_guard on{slow(gradd::compile_error_policy::never_retry)};
    auto start = std::chrono::steady_clock::now();
    chain_backward(4);
    REQUIRE(gradd::wait_for_compiles(std::chrono::seconds(10)));
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
    chain_backward(4);
    chain_backward(4);
    auto s = gradd::stats();
    CHECK(s.compiles == 1);
    CHECK(s.eager_for(gradd::fallback_reason::compile_error) == 2);
    REQUIRE(gradd::graph_stats().size() == 1);
    CHECK(gradd::graph_stats()[0].state == gradd::graph_state::failed);
  }
  SECTION("retry_after 0 ms: every backward after a failure compiles again") {
    gradd::reset();
    gradd::enable_guard on{slow(gradd::compile_error_policy::retry_after)};
    for (int i = 0; i < 2; ++i) {
      chain_backward(4);
      REQUIRE(gradd::wait_for_compiles(std::chrono::seconds(10)));
    }
    auto s = gradd::stats();
    CHECK(s.compiles == 2);
    CHECK(s.captures == 2);
  }
}

TEST_CASE("an unusable ir_dump_dir is refused at enable, changing nothing", "[engine][api]") {
  auto file = std::filesystem::temp_directory_path()
              / ("gradd_not_a_folder_" + std::to_string(::getpid()));
  std::ofstream(file) << "a file";
  auto s = gradd::test::sync_settings();
  s.logging.ir_dump_dir = (file / "under_a_file").string();
  CHECK_THROWS_AS(gradd::enable(s), gradd::config_error);
  CHECK(!gradd::is_enabled());
  CHECK_THROWS_AS(gradd::enable_guard{s}, gradd::config_error);
  CHECK(!gradd::is_enabled());
  s.logging.ir_dump_dir = file.string();
  CHECK_THROWS_WITH(gradd::enable(s), Catch::Contains("logging.ir_dump_dir"));
  std::filesystem::remove(file);
}

TEST_CASE("plans survive a policy change unless its passes differ", "[engine][api]") {
  gradd::reset();
  {
    gradd::enable_guard on{gradd::test::sync_settings()};
    chain_backward(6);
  }
  {
    auto other_logging = gradd::test::sync_settings();
    other_logging.logging.level = gradd::log_level::error;
    gradd::enable_guard on{other_logging};
    chain_backward(6);  // the same plan
  }
  CHECK(gradd::stats().compiles == 1);
  {
    auto other_passes = gradd::test::sync_settings();
    other_passes.passes.pipeline = "dce";
    gradd::enable_guard on{other_passes};
    chain_backward(6);  // compiled again, for these passes
  }
  auto s = gradd::stats();
  CHECK(s.compiles == 2);
  CHECK(s.plan_backwards == 3);
  CHECK(s.plans == 2);
}

TEST_CASE("synchronize_device synchronizes as torch::cuda::synchronize does", "[engine][api]") {
  if (torch::cuda::is_available()) {
    auto x = torch::ones({1 << 20}, torch::kCUDA) * 2;
    gradd::synchronize_device();
    CHECK(x.sum().item<double>() == 2.0 * (1 << 20));
  } else {
    // No device to synchronize: the error torch::cuda::synchronize raises.
    CHECK_THROWS_AS(torch::cuda::synchronize(), c10::Error);
    CHECK_THROWS_AS(gradd::synchronize_device(), c10::Error);
  }
}
