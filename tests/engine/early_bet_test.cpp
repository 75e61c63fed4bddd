// Note [Bets before the engine] (engine/early_bet.hpp): the hook
// takes the walk made before Engine::execute only for the backward it was
// made for.

#include "engine/early_bet.hpp"
#include "engine/engine_state.hpp"

#include <catch2/catch.hpp>
#include <torch/csrc/autograd/functions/basic_ops.h>
#include <torch/torch.h>

using namespace gradd::engine;

TEST_CASE("the hook adopts a walk made before the engine only from its root edges",
          "[engine][early_bet]") {
  auto w = torch::ones({3}, torch::requires_grad());
  auto mine = (w * 2).sum();
  auto other = (w * 3).sum();
  auto edges_of = [](const torch::Tensor& loss) {
    return torch::autograd::edge_list{torch::autograd::impl::gradient_edge(loss)};
  };
  torch::autograd::variable_list seed{torch::ones({})};
  auto policy = engine_state::instance().current_policy();
  early_bet_scope scope(edges_of(mine), seed, /*keep_graph=*/false, /*create_graph=*/false,
                        /*accumulate_grad=*/true, {});
  gradd::capture::graph_walk walk;

  SECTION("the GraphRoot Engine::execute makes of the same edges: adopted, with that root") {
    torch::autograd::GraphRoot root(edges_of(mine), seed);
    REQUIRE(adopt_walk(*policy, root, walk));
    CHECK(walk.nodes.front() == &root);
    CHECK(walk.nodes.size() == 4);  // root, SumBackward0, MulBackward0, w's AccumulateGrad
    CHECK(!adopt_walk(*policy, root, walk));  // taken once
  }
  SECTION("another backward's root: not adopted, and not later either") {
    torch::autograd::GraphRoot root(edges_of(other), seed);
    CHECK(!adopt_walk(*policy, root, walk));
    CHECK(walk.nodes.empty());
    torch::autograd::GraphRoot same(edges_of(mine), seed);
    CHECK(!adopt_walk(*policy, same, walk));
  }
}
