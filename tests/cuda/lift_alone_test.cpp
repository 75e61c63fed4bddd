// One node of a backward lifted alone (cuda/lift_alone.hpp): which node's
// lift holds a tensor that an early launch copies in before the full lift
// (Note [Early launch]). Lifting is the same on every device, so these run
// on CPU tensors, with the functional recording's graph of the backward.

#include "cuda/lift_alone.hpp"
#include "engine/functional/graph.hpp"
#include "engine/functional_hooks.hpp"

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <functional>

namespace {

using gradd::cuda::backward_nodes;
using gradd::cuda::find_holder;

/// Runs `backward` with the compiled-autograd hook calling `look` on its
/// graph (walk and node table) in place of any engine: nothing here needs
/// the gradients.
void look_at_graph(const std::function<void()>& backward,
                   const std::function<void(const backward_nodes&)>& look) {
  static std::function<void(const backward_nodes&)> current;
  current = look;
  gradd::test::hook_scope hooks(
      [](const std::shared_ptr<torch::autograd::Node>& root, const torch::autograd::GraphTask& task,
         bool accumulate_grad, const torch::autograd::edge_list& outputs) {
        at::NoGradGuard no_grad;  // as gradd's hook reads a graph
        auto g = gradd::engine::functional::read_graph(root, task, accumulate_grad, outputs);
        current(backward_nodes{g.walk.nodes, g.ir});
        return torch::autograd::variable_list(outputs.size());
      });
  backward();
}

} // namespace

TEST_CASE("a root gradient is held by the root's lift, a saved tensor by its node's",
          "[engine][graphs]") {
  torch::manual_seed(3);
  auto w = torch::randn({8, 4}).requires_grad_();
  auto x = torch::randn({6, 8});
  auto targets = torch::tensor({0, 1, 2, 3, 0, 1});
  auto loss = torch::nll_loss(torch::log_softmax(torch::mm(x, w), 1), targets);
  auto root_gradient = torch::ones_like(loss);
  bool looked = false;
  look_at_graph([&] { loss.backward(root_gradient); },
                [&](const backward_nodes& b) {
                  looked = true;
                  REQUIRE(b.table.nodes[0].is_root);
                  // Node 1, NllLossBackward0, is the recording's reader of both.
                  auto root_held = find_holder(b, 1, root_gradient);
                  REQUIRE(root_held);
                  CHECK(root_held->node == 0);
                  CHECK(root_held->ordinal == 0);
                  auto target_held = find_holder(b, 1, targets);
                  REQUIRE(target_held);
                  CHECK(target_held->node == 1);
                  CHECK_FALSE(find_holder(b, 1, torch::ones_like(loss)));  // another tensor
                  CHECK_FALSE(find_holder(b, 1, targets.view({2, 3})));    // another layout
                });
  CHECK(looked);
}
