// Cases where the order of the stock engine is visible in the result: float
// sums of three or more terms (whose value depends on the order they are
// added in), ties between AccumulateGrad nodes ready at once, hooks added to
// a structure after its plan compiled, and one structure at several sizes.

#include "engine/grad_check.hpp"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>

namespace {

using gradd::test::check_against_stock;
using torch::Tensor;

/// A magnitude at which adding 1 is lost in `dtype`'s rounding.
double huge_for(torch::Dtype dtype) {
  return dtype == torch::kFloat32 ? 1e8 : 1e17;
}

/// Whether adding `terms` in some orders gives different `dtype` results:
/// a case built on them can tell a wrong summation order.
bool order_matters(std::vector<double> terms, torch::Dtype dtype) {
  std::sort(terms.begin(), terms.end());
  std::vector<double> sums;
  do {
    auto sum = torch::zeros({}, dtype);
    for (double t : terms)
      sum = sum + torch::full({}, t, dtype);
    sums.push_back(sum.item<double>());
  } while (std::next_permutation(terms.begin(), terms.end()));
  return std::adjacent_find(sums.begin(), sums.end(), std::not_equal_to<>()) != sums.end();
}

/// Records the order in which post-accumulate-grad hooks fire.
struct acc_order_hook : torch::autograd::PostAccumulateGradHook {
  acc_order_hook(std::vector<int>& order, int index) : order(order), index(index) {}
  void operator()(const torch::autograd::Variable&) override { order.push_back(index); }
  std::vector<int>& order;
  int index;
};

struct logging_pre_hook : torch::autograd::FunctionPreHook {
  logging_pre_hook(std::vector<std::string>& log, std::string name)
      : log(log), name(std::move(name)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& g) override {
    log.push_back("pre_hook " + name);
    return g;
  }
  std::vector<std::string>& log;
  std::string name;
};

} // namespace

TEST_CASE("gradient sums of four terms add in the stock engine's order", "[engine][order]") {
  for (auto dtype : {torch::kFloat32, torch::kFloat64}) {
    DYNAMIC_SECTION(dtype) {
      auto huge = huge_for(dtype);
      REQUIRE(order_matters({huge, 1, -huge, 3}, dtype));
      torch::manual_seed(3);
      auto x = torch::ones({4}, dtype).requires_grad_();
      auto w = torch::randn({4}, dtype).requires_grad_();
      auto s = check_against_stock({x, w}, [&] {
        // Four consumers of the leaf x and four of the intermediate h:
        // both input buffers add four terms.
        auto h = (x * w).tanh();
        auto loss = (x * huge).sum() + x.sum() + (x * -huge).sum() + (x * 3).sum()
                    + (h * huge).sum() + (h * 2).sum() + (h * -huge).sum() + h.sum();
        loss.backward();
        return std::vector<Tensor>{};
      });
      CHECK(s.plan_backwards == 2);
    }
  }
}

TEST_CASE("AccumulateGrad nodes ready at once run in the stock engine's order",
          "[engine][order]") {
  torch::manual_seed(4);
  std::vector<Tensor> leaves;
  for (int i = 0; i < 6; ++i)
    leaves.push_back(torch::randn({3}).requires_grad_());
  auto step = [&] {
    std::vector<int> order;
    for (int i = 0; i < 6; ++i) {
      leaves[i].mutable_grad() = Tensor();
      torch::autograd::impl::set_post_acc_grad_hooks(
          leaves[i], std::make_unique<acc_order_hook>(order, i));
    }
    // One StackBackward makes all six AccumulateGrad nodes ready together.
    (torch::stack(leaves) * 2).sum().backward();
    for (const auto& l : leaves)
      torch::autograd::impl::set_post_acc_grad_hooks(l, nullptr);
    return order;
  };
  auto stock = [&] {
    gradd::disable_guard off;
    return step();
  }();
  REQUIRE(stock.size() == 6);
  gradd::reset();
  gradd::enable_guard on{gradd::test::sync_settings()};
  for (int run = 0; run < 2; ++run)
    CHECK(step() == stock);
  CHECK(gradd::stats().plan_backwards == 2);
}

TEST_CASE("hooks added after a plan compiled run as on the stock engine", "[engine][order]") {
  torch::manual_seed(5);
  auto w = torch::randn({3, 3}).requires_grad_();
  auto x = torch::randn({2, 3});
  // hooked: 0 none, 1 a pre-hook on a node that runs and a tensor hook on
  // the intermediate whose gradient is captured (its node only captures).
  auto step = [&](int hooked, std::vector<std::string>& log) {
    auto h = torch::tanh(x.mm(w));
    auto y = h.sigmoid();
    if (hooked) {
      y.grad_fn()->add_pre_hook(std::make_unique<logging_pre_hook>(log, "sigmoid"));
      h.register_hook([&log](Tensor g) {
        log.push_back("tensor_hook h");
        return g * 2;
      });
    }
    auto loss = (y * y).sum() + h.sum();
    return torch::autograd::grad({loss}, {h, w});
  };
  std::vector<std::string> stock_log;
  auto stock = [&] {
    gradd::disable_guard off;
    return step(1, stock_log);
  }();
  REQUIRE(stock_log.size() == 2);
  gradd::reset();
  gradd::enable_guard on{gradd::test::sync_settings()};
  std::vector<std::string> ignored;
  step(0, ignored);  // the hook-free structure compiles first
  std::vector<std::string> log;
  auto trace_before = gradd::execute::plan_trace_of_this_thread().runs;
  auto got = step(1, log);
  CHECK(gradd::execute::plan_trace_of_this_thread().runs == trace_before + 1);
  CHECK(log == stock_log);
  gradd::test::require_bitwise_equal(stock, got);
  CHECK(gradd::stats().cache_misses == 2);  // hooks are part of the structure
}

TEST_CASE("one structure at several sizes is one plan, exact at each size",
          "[engine][order]") {
  gradd::reset();
  for (int64_t n : {3, 5, 8, 5}) {
    INFO("size " << n);
    torch::manual_seed(n);
    auto w = torch::randn({n, n}).requires_grad_();
    auto b = torch::randn({n}).requires_grad_();
    auto x = torch::randn({4, n});
    auto expected = [&] {
      gradd::disable_guard off;
      (torch::relu(x.mm(w) + b) + x.mm(w)).pow(2).sum().backward();
      return gradd::test::grads_of({w, b});
    }();
    gradd::test::clear_grads({w, b});
    gradd::enable_guard on{gradd::test::sync_settings()};
    (torch::relu(x.mm(w) + b) + x.mm(w)).pow(2).sum().backward();
    gradd::test::require_bitwise_equal(expected, gradd::test::grads_of({w, b}));
  }
  auto s = gradd::stats();
  CHECK(s.cache_misses == 1);
  CHECK(s.plan_backwards == 4);
}
