// Observable order: every hook kind reachable from C++ fires, and `.grad`
// fields fill, in the same sequence under gradd as on the stock engine.

#include "engine/grad_check.hpp"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace {

using torch::Tensor;
using torch::autograd::variable_list;

/// Records events, each with which watched leaves have a `.grad` by then.
struct event_log {
  std::vector<Tensor> leaves;
  std::vector<std::string> events;

  void add(const std::string& what) {
    std::string filled;
    for (const auto& l : leaves)
      filled += l.grad().defined() ? '1' : '0';
    events.push_back(what + " grads=" + filled);
  }
};

struct logging_pre_hook : torch::autograd::FunctionPreHook {
  logging_pre_hook(event_log& log, std::string name) : log(log), name(std::move(name)) {}
  variable_list operator()(const variable_list& grads) override {
    log.add("pre_hook " + name);
    return grads;
  }
  event_log& log;
  std::string name;
};

struct logging_post_hook : torch::autograd::FunctionPostHook {
  logging_post_hook(event_log& log, std::string name) : log(log), name(std::move(name)) {}
  variable_list operator()(const variable_list& outputs, const variable_list&) override {
    log.add("post_hook " + name);
    return outputs;
  }
  event_log& log;
  std::string name;
};

struct logging_acc_hook : torch::autograd::PostAccumulateGradHook {
  logging_acc_hook(event_log& log, std::string name) : log(log), name(std::move(name)) {}
  void operator()(const torch::autograd::Variable&) override {
    log.add("post_acc_grad_hook " + name);
  }
  event_log& log;
  std::string name;
};

/// One forward + backward with a hook of every kind; returns the events.
std::vector<std::string> hooked_step(const std::vector<Tensor>& w) {
  event_log log;
  log.leaves = w;
  for (size_t i = 0; i < w.size(); ++i) {
    std::string name = "w";  // not "w" + ...: GCC 12 warns of that (-Wstringop-overflow)
    name += std::to_string(i);
    w[i].mutable_grad() = Tensor();
    torch::autograd::impl::set_post_acc_grad_hooks(
        w[i], std::make_unique<logging_acc_hook>(log, name));
  }
  auto a = torch::tanh(w[0].mm(w[1]));
  auto b = torch::sigmoid(a.mm(w[2]));
  auto c = a.sum(1, true) * b;
  a.register_hook([&](Tensor g) {
    log.add("tensor_hook a");
    return g;
  });
  b.retain_grad();
  auto w1_hook = w[1].register_hook([&](Tensor g) {
    log.add("tensor_hook w1");
    return g;
  });
  for (const auto& [t, name] : {std::pair{a, "a"}, std::pair{b, "b"}, std::pair{c, "c"}}) {
    t.grad_fn()->add_pre_hook(std::make_unique<logging_pre_hook>(log, name));
    t.grad_fn()->add_post_hook(std::make_unique<logging_post_hook>(log, name));
  }
  c.sum().backward();
  log.add("end");
  w[1].remove_hook(w1_hook);  // leaf hooks outlive the step
  for (const auto& t : w)
    torch::autograd::impl::set_post_acc_grad_hooks(t, nullptr);
  return log.events;
}

} // namespace

TEST_CASE("every hook kind fires in the stock engine's order", "[engine][hooks]") {
  torch::manual_seed(9);
  std::vector<Tensor> w{torch::randn({4, 3}, torch::kFloat64).requires_grad_(),
                        torch::randn({3, 5}, torch::kFloat64).requires_grad_(),
                        torch::randn({5, 2}, torch::kFloat64).requires_grad_()};
  auto stock = [&] {
    gradd::disable_guard off;
    return hooked_step(w);
  }();
  REQUIRE(stock.size() == 12);  // 3 pre, 3 post, 2 tensor, 3 post-accumulate-grad, the end
  gradd::reset();
  gradd::enable_guard on{gradd::test::sync_settings()};
  for (int run = 0; run < 2; ++run) {
    INFO("run " << run);
    CHECK(hooked_step(w) == stock);
  }
  CHECK(gradd::stats().plan_backwards == 2);
}
