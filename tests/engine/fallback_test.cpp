// What gradd leaves to the stock engine, and errors raised inside a backward.

#include "engine/grad_check.hpp"

#include <c10/core/AutogradState.h>
#include <torch/csrc/autograd/anomaly_mode.h>

namespace {

using gradd::fallback_reason;
using gradd::test::check_against_stock;
using torch::Tensor;

std::vector<Tensor> two_leaves() {
  torch::manual_seed(11);
  return {torch::randn({4, 4}, torch::kFloat64).requires_grad_(),
          torch::randn({4}, torch::kFloat64).requires_grad_()};
}

} // namespace

/// A create_graph backward and the plain backward of its gradient, on
/// `device`, under check_against_stock; returns the statistics.
gradd::statistics second_order_on(torch::Device device) {
  torch::manual_seed(11);
  std::vector<Tensor> p{torch::randn({4, 4}, torch::kFloat64).to(device).requires_grad_(),
                        torch::randn({4}, torch::kFloat64).to(device).requires_grad_()};
  return check_against_stock(p, [&] {
    auto y = torch::mv(p[0], p[1]).pow(3).sum();
    auto g = torch::autograd::grad({y}, {p[1]}, {}, std::nullopt, /*create_graph=*/true);
    g[0].sum().backward();  // second order: a plain backward, served by a plan
    return std::vector<Tensor>{g[0].detach()};
  });
}

TEST_CASE("create_graph on the CPU runs on plans", "[engine][fallback]") {
  auto s = second_order_on(torch::kCPU);
  CHECK(s.eager_for(fallback_reason::create_graph) == 0);
  CHECK(s.plan_backwards == 4);
}

TEST_CASE("create_graph on CUDA runs on the stock engine, counted, unless the backward runs "
          "on one thread",
          "[engine][fallback][cuda]") {
  if (!torch::cuda::is_available()) {
    WARN("CUDA not available: CUDA case skipped");
    return;
  }
  SECTION("the stock engine's device threads") {
    auto s = second_order_on(torch::kCUDA);
    CHECK(s.eager_for(fallback_reason::create_graph) == 2);
    CHECK(s.plan_backwards == 2);
  }
  SECTION("multithreading off: every node on the caller's thread") {
    c10::AutogradState::get_tls_state().set_multithreading_enabled(false);
    auto s = second_order_on(torch::kCUDA);
    c10::AutogradState::get_tls_state().set_multithreading_enabled(true);
    CHECK(s.eager_for(fallback_reason::create_graph) == 0);
    CHECK(s.plan_backwards == 4);
  }
}

TEST_CASE("force_eager serves every backward with the stock engine", "[engine][fallback]") {
  auto p = two_leaves();
  gradd::reset();
  gradd::enable_guard on{gradd::test::force_eager_settings()};
  torch::mv(p[0], p[1]).sum().backward();
  auto s = gradd::stats();
  CHECK(s.eager_for(fallback_reason::force_eager) == 1);
  CHECK(s.plan_backwards == 0);
  CHECK(s.captures == 0);
}

TEST_CASE("anomaly mode runs on the stock engine", "[engine][fallback]") {
  auto p = two_leaves();
  torch::autograd::DetectAnomalyGuard anomaly;
  auto s = check_against_stock(p, [&] {
    torch::mv(p[0], p[1]).sum().backward();
    return std::vector<Tensor>{};
  }, 2, gradd::test::served_by::stock_engine);
  CHECK(s.eager_for(fallback_reason::anomaly_mode) == 2);
}

TEST_CASE("an exception inside a backward reaches the caller and gradd stays usable",
          "[engine][fallback]") {
  auto p = two_leaves();
  gradd::reset();
  gradd::enable_guard on{gradd::test::sync_settings()};
  auto handle = p[1].register_hook([](Tensor g) -> Tensor {
    throw std::runtime_error("hook failed on purpose");
  });
  REQUIRE_THROWS_WITH(torch::mv(p[0], p[1]).sum().backward(),
                      Catch::Contains("hook failed on purpose"));
  p[1].remove_hook(handle);
  gradd::test::clear_grads(p);
  torch::mv(p[0], p[1]).sum().backward();
  CHECK(p[1].grad().defined());
  CHECK(gradd::stats().plan_backwards == 1);
}

TEST_CASE("a second backward through a freed graph fails as on the stock engine",
          "[engine][fallback]") {
  auto p = two_leaves();
  auto message_of = [&](bool with_gradd) {
    std::optional<gradd::enable_guard> on;
    if (with_gradd)
      on.emplace(gradd::test::sync_settings());
    auto loss = torch::mv(p[0], p[1]).exp().sum();
    loss.backward();
    try {
      loss.backward();
    } catch (const c10::Error& e) {
      return std::string(e.what_without_backtrace());
    }
    return std::string("no error");
  };
  auto stock = message_of(false);
  CHECK_THAT(stock, Catch::Contains("second time"));
  CHECK(message_of(true) == stock);
}

TEST_CASE("nested tensors run on the stock engine, or raise if the policy says so",
          "[engine][fallback]") {
  torch::manual_seed(13);
  auto a = torch::randn({2, 3}, torch::kFloat64).requires_grad_();
  auto b = torch::randn({4, 3}, torch::kFloat64).requires_grad_();
  auto step = [&] {
    auto nested = torch::nested::as_nested_tensor({a, b}) * 2;
    torch::nested::to_padded_tensor(nested, 0).sum().backward();
    return std::vector<Tensor>{};
  };
  auto s = check_against_stock({a, b}, step, 2, gradd::test::served_by::stock_engine);
  CHECK(s.eager_for(fallback_reason::nested_tensor) == 2);
  CHECK(s.plan_backwards == 0);

  auto policy = gradd::test::sync_settings();
  policy.fallback.on_unsupported = gradd::unsupported_policy::error;
  gradd::reset();
  gradd::enable_guard on{policy};
  for (int run = 0; run < 2; ++run)  // the verdict is cached; the policy still applies
    CHECK_THROWS_WITH(step(), Catch::Contains("cannot serve this backward: nested_tensor"));
}
