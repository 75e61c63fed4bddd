// Leaves with hooks around a CUDA graph (Note [Live leaves],
// cuda/backward_graph.cpp): a post-hook on every parameter's AccumulateGrad
// that reads `.grad`, as DistributedDataParallel's reducer registers it, a
// tensor hook that changes a parameter's gradient, a post-accumulate-grad
// hook. Graphs serve the structure, and every hook runs in the stock
// engine's order, as the current node, and sees and leaves what it does on
// the stock engine, bitwise; on the graph's stream of leaves, while the
// graph still runs.

#include "cuda/graph_loop.hpp"

#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <stdexcept>

using gradd::test::clear_grads;
using gradd::test::grads_of;
using gradd::test::have_cuda;
using gradd::test::mlp;
using gradd::test::policy;
using torch::Tensor;
using torch::autograd::variable_list;

namespace {

/// What the hooks of one backward saw, in the order they ran.
struct hook_log {
  std::vector<int64_t> order;  ///< the parameter's index; +100 for its post-accumulate-grad hook
  std::vector<Tensor> seen;    ///< what each hook read, cloned
  bool current_node_held = true;  ///< each post-hook ran as its node
  bool raise = false;          ///< the next post-hook raises
  /// Post-hooks that ran on another stream than the backward's: under
  /// gradd, on the graph's leaf stream. Not compared with the stock engine.
  size_t off_backward_stream = 0;

  /// What the step leaves to compare, emptying the log.
  std::vector<Tensor> take() {
    auto all = std::move(seen);
    all.push_back(torch::tensor(order));
    all.push_back(torch::tensor(current_node_held));
    order.clear();
    seen.clear();
    current_node_held = true;
    return all;
  }
};

struct logging_acc_hook : torch::autograd::PostAccumulateGradHook {
  logging_acc_hook(hook_log& log, int64_t index) : log_(log), index_(index) {}
  void operator()(const torch::autograd::Variable& tensor) override {
    log_.order.push_back(100 + index_);
    log_.seen.push_back(tensor.grad().clone());
  }
  hook_log& log_;
  int64_t index_;
};

/// Hooks on the mlp's leaves, their AccumulateGrad nodes held (as the
/// reducer holds them) so that every forward reuses them.
struct hooked_leaves {
  hooked_leaves(const std::vector<Tensor>& params, hook_log& log) : params_(params) {
    for (size_t i = 0; i < params.size(); ++i) {
      auto node = torch::autograd::impl::grad_accumulator(params[i]);
      node->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
          [&log, i, raw = node.get(), params](const variable_list& outputs,
                                               const variable_list& inputs) {
            if (log.raise)
              throw std::runtime_error("hook raised on purpose");
            log.order.push_back(static_cast<int64_t>(i));
            log.seen.push_back(inputs.at(0).clone());
            // Every leaf's `.grad`: those the stock engine reached before
            // this one written, the others not yet.
            for (const auto& param : params) {
              const auto& grad = param.grad();
              log.seen.push_back(grad.defined() ? grad.clone() : Tensor());
            }
            log.current_node_held =
                log.current_node_held && torch::autograd::get_current_node().get() == raw;
            log.off_backward_stream += c10::cuda::getCurrentCUDAStream()
                                       != c10::cuda::getDefaultCUDAStream();
            return outputs;
          }));
      accumulators_.push_back(std::move(node));
    }
    params_[0].register_hook([](Tensor g) { return g * 0.5; });
    torch::autograd::impl::set_post_acc_grad_hooks(params_[3],
                                                   std::make_unique<logging_acc_hook>(log, 3));
  }
  ~hooked_leaves() {
    torch::autograd::impl::clear_hooks(params_[0]);
    torch::autograd::impl::set_post_acc_grad_hooks(params_[3], nullptr);
  }

  std::vector<Tensor> params_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
};

} // namespace

TEST_CASE("leaves with hooks run live around a CUDA graph", "[cuda][graphs]") {
  if (!have_cuda())
    return;
  mlp m;
  auto params = m.parameters();
  hook_log log;
  hooked_leaves hooks(params, log);
  auto step = [&](size_t i) {
    clear_grads(params);
    m.loss(8, static_cast<int64_t>(i)).backward();
    auto out = grads_of(params);
    for (auto& seen : log.take())
      out.push_back(std::move(seen));
    return out;
  };

  SECTION("every hook in the stock engine's order, seeing its gradients") {
    auto s = gradd::test::compare_steps(policy(gradd::graph_shape_policy::static_shapes), 6, step);
    CHECK(s.graph_backwards >= 3);
    CHECK(s.piecewise_backwards == s.graph_backwards);
    auto all = gradd::graph_stats();
    REQUIRE(all.size() == 1);
    CHECK(all[0].plans_only.empty());
    CHECK(all[0].cuda_graphs == 1);
    CHECK(all[0].live_nodes == params.size());
    // Each leaf waits on the stream of the leaves for its own gradient, not
    // for the whole graph.
    CHECK(log.off_backward_stream >= params.size());
  }
  SECTION("backwards that retain their graph, twice through each") {
    auto twice = [&](size_t i) {
      clear_grads(params);
      auto loss = m.loss(8, static_cast<int64_t>(i));
      loss.backward({}, /*retain_graph=*/true);
      loss.backward();
      auto out = grads_of(params);
      for (auto& seen : log.take())
        out.push_back(std::move(seen));
      return out;
    };
    auto s = gradd::test::compare_steps(policy(gradd::graph_shape_policy::static_shapes), 5, twice);
    CHECK(s.piecewise_backwards >= 4);
    CHECK(s.piecewise_backwards == s.graph_backwards);
  }
  SECTION("a hook that raises fails its backward, and the next is served as before") {
    std::vector<std::vector<Tensor>> stock;
    {
      gradd::disable_guard off;
      for (size_t i = 0; i < 5; ++i)
        stock.push_back(step(i));
    }
    gradd::reset();
    gradd::enable_guard on{policy(gradd::graph_shape_policy::static_shapes)};
    for (size_t i = 0; i < 4; ++i) {
      gradd::test::require_bitwise_equal(stock[i], step(i));
      REQUIRE(gradd::wait_for_compiles());
    }
    REQUIRE(gradd::stats().graph_backwards >= 2);
    log.raise = true;
    CHECK_THROWS_WITH(step(4), Catch::Matchers::Contains("hook raised on purpose"));
    log.raise = false;
    log.take();
    auto before = gradd::stats().graph_backwards;
    gradd::test::require_bitwise_equal(stock[4], step(4));
    CHECK(gradd::stats().graph_backwards == before + 1);
    CHECK(gradd::stats().raised_backwards == 1);
  }
}
