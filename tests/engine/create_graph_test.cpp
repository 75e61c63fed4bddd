// Backwards that record their graph (create_graph=true) on plans (Note
// [Backwards that record their graph]): the gradients carry nodes of their
// own, a second backward through them is served by a plan too, and every
// gradient of either order is the stock engine's, bitwise.

#include "engine/grad_check.hpp"

namespace {

using gradd::fallback_reason;
using gradd::test::check_against_stock;
using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// x³ with a backward made of differentiable ops, so that it has a
/// backward of its own.
struct cubed : torch::autograd::Function<cubed> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) {
    ctx->save_for_backward({x});
    return x.pow(3);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto x = ctx->get_saved_variables()[0];
    return {grads[0] * 3 * x * x};
  }
};

struct critic {
  Tensor w1 = torch::randn({6, 8}, torch::kFloat64).requires_grad_();
  Tensor b1 = torch::randn({8}, torch::kFloat64).requires_grad_();
  Tensor w2 = torch::randn({8, 1}, torch::kFloat64).requires_grad_();
  std::vector<Tensor> parameters() const { return {w1, b1, w2}; }
  Tensor operator()(const Tensor& x) const { return torch::tanh(x.mm(w1) + b1).mm(w2); }
};

} // namespace

TEST_CASE("a gradient-penalty step is served by plans, bitwise", "[engine][create_graph]") {
  torch::manual_seed(21);
  critic d;
  auto real = torch::randn({5, 6}, torch::kFloat64);
  auto s = check_against_stock(d.parameters(), [&] {
    // WGAN-GP: the critic's gradient at its input, penalized towards norm 1.
    auto x = real.clone().requires_grad_();
    auto score = d(x);
    auto g = torch::autograd::grad({score.sum()}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
    REQUIRE(g.requires_grad());
    auto penalty = (g.norm(2, 1) - 1).pow(2).mean();
    (score.mean() + 10 * penalty).backward();
    return std::vector<Tensor>{g.detach(), x.grad()};
  }, 3);
  CHECK(s.plan_backwards == 6);  // both backwards of each of the three steps
  CHECK(s.eager_backwards == 0);
}

TEST_CASE("a Hessian-vector product is served by plans, bitwise", "[engine][create_graph]") {
  torch::manual_seed(22);
  critic f;
  auto x = torch::randn({4, 6}, torch::kFloat64);
  auto v = f.parameters();
  for (auto& t : v)
    t = torch::randn_like(t);
  auto s = check_against_stock(f.parameters(), [&] {
    auto params = f.parameters();
    auto loss = f(x).pow(2).sum();
    auto g = torch::autograd::grad({loss}, params, {}, std::nullopt, /*create_graph=*/true);
    auto dot = (g[0] * v[0]).sum() + (g[1] * v[1]).sum() + (g[2] * v[2]).sum();
    auto hv = torch::autograd::grad({dot}, params);
    return hv;
  });
  CHECK(s.plan_backwards == 4);
}

TEST_CASE("double backward through a custom Function is served by plans, bitwise",
          "[engine][create_graph]") {
  torch::manual_seed(23);
  auto x = torch::randn({7}, torch::kFloat64).requires_grad_();
  auto s = check_against_stock({x}, [&] {
    auto y = cubed::apply(x * 1.5).sum();
    auto dy = torch::autograd::grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
    dy.sum().backward();  // d²y/dx² into x.grad
    return std::vector<Tensor>{dy.detach()};
  });
  CHECK(s.plan_backwards == 4);
  CHECK(s.eager_for(fallback_reason::create_graph) == 0);
}

TEST_CASE("create_graph with retain_graph=false frees the first graph, as the stock engine does",
          "[engine][create_graph]") {
  torch::manual_seed(24);
  auto x = torch::randn({3}, torch::kFloat64).requires_grad_();
  gradd::reset();
  gradd::enable_guard on{gradd::test::sync_settings()};
  auto y = (x.exp() * x).sum();
  auto g = torch::autograd::grad({y}, {x}, {}, /*retain_graph=*/false, /*create_graph=*/true)[0];
  CHECK(g.requires_grad());
  CHECK_THROWS_WITH(torch::autograd::grad({y}, {x}),
                    Catch::Contains("Trying to backward through the graph a second time"));
  CHECK(gradd::stats().plan_backwards == 1);
}
