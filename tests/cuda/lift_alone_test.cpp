// One node of a backward lifted alone (cuda/lift_alone.hpp): which node's
// lift holds a tensor that an early launch copies in before the full lift
// (Note [Early launch]). Lifting is the same on every device, so these run
// on CPU tensors, with the functional recording's graph of the backward
// (graph_look.hpp).

#include "cuda/graph_look.hpp"

#include <catch2/catch.hpp>

using gradd::cuda::backward_nodes;
using gradd::cuda::find_holder;
using gradd::test::look_at_graph;

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
