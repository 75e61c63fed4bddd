// What code run during a backward can ask the engine (Note [The current
// node], docs/design.md "What code sees during a backward"): the same under
// gradd, in sync and async mode, as on the stock engine, from every kind of
// callback a backward calls.

#include "engine/grad_check.hpp"
#include "execute/current_node.hpp"

#include <c10/core/AutogradState.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/generated/Functions.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/csrc/autograd/saved_variable_hooks.h>

#include <sstream>

namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::Node;
using torch::autograd::variable_list;

/// What each callback of one backward saw, one line per callback.
struct sightings {
  std::vector<std::string> lines;
  std::vector<Node*> watched;  ///< nodes whose "will the engine run it" is asked
  int first_task = -1;

  /// libtorch's execution order is asked for at the root only: the stock
  /// engine's own throws once a node has run (it counts down dependencies
  /// the order is computed from).
  void look(const std::string& where, bool with_order = false) {
    auto current = torch::autograd::get_current_node();
    int task = torch::autograd::get_current_graph_task_id();
    if (lines.empty())
      first_task = task;
    std::ostringstream line;
    line << where << ": node=" << (current ? current->name() : "none")
         << " task=" << (task != -1 && task == first_task ? "this" : "other")
         << " grad_mode=" << c10::GradMode::is_enabled()
         << " keep_graph=" << torch::autograd::get_current_graph_task_keep_graph();
    if (with_order) {
      line << " order=";
      for (auto* n : torch::autograd::get_current_graph_task_execution_order())
        line << n->name() << ',';
    }
    line << " will_run=";
    const auto* in_graph = torch::autograd::get_current_graph_task_nodes_in_graph();
    const auto* exec_info = torch::autograd::get_current_graph_task_exec_info();
    for (auto* n : watched) {
      bool runs = in_graph->count(n) > 0;
      if (runs && !exec_info->empty())
        runs = exec_info->count(n) > 0 && exec_info->at(n).should_execute();
      line << runs;
    }
    lines.push_back(line.str());
  }
};

sightings* watching = nullptr;

void look(const std::string& where, bool with_order = false) {
  watching->look(where, with_order);
}

struct doubled : torch::autograd::Function<doubled> {
  static Tensor forward(AutogradContext*, const Tensor& x) { return x * 2; }
  static variable_list backward(AutogradContext*, variable_list grads) {
    look("function backward");
    return {grads[0] * 2};
  }
};

struct looking_pre_hook : torch::autograd::FunctionPreHook {
  explicit looking_pre_hook(bool at_root = false) : at_root(at_root) {}
  variable_list operator()(const variable_list& grads) override {
    look(at_root ? "pre-hook at the root" : "pre-hook", at_root);
    return grads;
  }
  bool at_root;
};

struct looking_post_hook : torch::autograd::FunctionPostHook {
  variable_list operator()(const variable_list& outputs, const variable_list&) override {
    look("post-hook");
    return outputs;
  }
};

struct looking_acc_hook : torch::autograd::PostAccumulateGradHook {
  void operator()(const torch::autograd::Variable&) override { look("post-accumulate-grad hook"); }
};

/// Looks when the saved tensor is unpacked, and registers a post-hook on
/// the node being run from there: it must fire.
struct looking_unpack_hooks : torch::autograd::SavedVariableHooks {
  void call_pack_hook(const Tensor& tensor) override { packed = tensor; }
  Tensor call_unpack_hook() override {
    look("unpack hook");
    if (auto current = torch::autograd::get_current_node())
      current->add_post_hook(std::make_unique<looking_post_hook>());
    return packed;
  }
  Tensor packed;
};

/// One forward and backward whose callbacks look; returns what they saw.
std::vector<std::string> looked_step(const std::vector<Tensor>& w, bool through_grad) {
  sightings seen;
  watching = &seen;
  for (const auto& leaf : w)
    torch::autograd::impl::set_post_acc_grad_hooks(leaf, std::make_unique<looking_acc_hook>());
  auto a = doubled::apply(w[0].mm(w[1]));
  auto b = a.exp();
  static_cast<torch::autograd::generated::ExpBackward0&>(*b.grad_fn())
      .result_.register_hooks(std::make_unique<looking_unpack_hooks>());
  auto c = b.sum(1) * w[2];
  a.register_hook([](Tensor g) {
    look("tensor hook");
    return g;
  });
  c.grad_fn()->add_pre_hook(std::make_unique<looking_pre_hook>());
  a.grad_fn()->add_post_hook(std::make_unique<looking_post_hook>());
  auto loss = c.sum();
  loss.grad_fn()->add_pre_hook(std::make_unique<looking_pre_hook>(/*at_root=*/true));
  seen.watched = {c.grad_fn().get(), b.grad_fn().get(), a.grad_fn().get()};
  if (through_grad)
    torch::autograd::grad({loss}, {w[1]});
  else
    loss.backward();
  for (const auto& leaf : w)
    torch::autograd::impl::set_post_acc_grad_hooks(leaf, nullptr);
  watching = nullptr;
  return seen.lines;
}

/// Runs looked_step on the stock engine and `runs` times under `policy`;
/// the last run under gradd, served by a plan, must see what the stock
/// engine's did.
void check_sightings(const gradd::settings& policy, int runs, bool through_grad) {
  INFO((through_grad ? "autograd::grad" : "backward") << ", " << runs << " runs");
  torch::manual_seed(5);
  std::vector<Tensor> w{torch::randn({3, 4}, torch::kFloat64).requires_grad_(),
                        torch::randn({4, 5}, torch::kFloat64).requires_grad_(),
                        torch::randn({3}, torch::kFloat64).requires_grad_()};
  // libtorch gives the execution order only to a backward on one thread.
  c10::AutogradState::get_tls_state().set_multithreading_enabled(false);
  auto stock = [&] {
    gradd::disable_guard off;
    return looked_step(w, through_grad);
  }();
  REQUIRE(stock.size() >= 5);
  CHECK(stock[0].find("node=none") == std::string::npos);
  gradd::reset();
  std::vector<std::string> under_gradd;
  uint64_t plans_before_last = 0;
  {
    gradd::enable_guard on{policy};
    for (int run = 0; run < runs; ++run) {
      plans_before_last = gradd::stats().plan_backwards;
      under_gradd = looked_step(w, through_grad);
      REQUIRE(gradd::wait_for_compiles(std::chrono::seconds(10)));
    }
  }
  c10::AutogradState::get_tls_state().set_multithreading_enabled(true);
  CHECK(gradd::stats().plan_backwards == plans_before_last + 1);
  CHECK(under_gradd == stock);
}

} // namespace

TEST_CASE("callbacks see the stock engine's current node and graph task", "[engine][hooks]") {
  auto async = gradd::test::sync_settings();
  async.compile.mode = gradd::compile_mode::async;
  for (bool through_grad : {false, true}) {
    check_sightings(gradd::test::sync_settings(), 1, through_grad);
    check_sightings(async, 2, through_grad);
  }
}

TEST_CASE("the current node can be set on this libtorch", "[engine][hooks]") {
  CHECK(gradd::execute::current_node_reachable());
}
