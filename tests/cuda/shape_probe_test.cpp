// The shape probe (cuda/shape_probe.hpp): what a bet before the lift reads
// to tell a structure's shapes apart, the shapes flowing through the
// loss's node (Note [Shape probe]). On CPU tensors (graph_look.hpp).

#include "cuda/graph_look.hpp"
#include "cuda/shape_probe.hpp"

#include <catch2/catch.hpp>

#include <optional>

using gradd::cuda::backward_nodes;
using gradd::cuda::probe_key;
using gradd::test::look_at_graph;

namespace {

/// What the probe of a linear layer's squared mean reads for a batch of
/// `batch` in `dtype`; with `head_only`, from the walk's head alone (the
/// root and the root edge's node, as a bet before the walk has it).
std::optional<uint64_t> probe_of_batch(int64_t batch, torch::Dtype dtype = torch::kFloat,
                                       bool head_only = false) {
  torch::manual_seed(5);
  auto w = torch::randn({8, 4}, dtype).requires_grad_();
  auto loss = torch::mm(torch::randn({batch, 8}, dtype), w).square().mean();
  std::optional<uint64_t> key;
  bool looked = false;
  look_at_graph([&] { loss.backward(); },
                [&](const backward_nodes& b) {
                  looked = true;
                  std::vector<torch::autograd::Node*> head(b.nodes.begin(), b.nodes.begin() + 2);
                  key = probe_key(head_only ? backward_nodes{head, b.table} : b);
                });
  REQUIRE(looked);
  return key;
}

} // namespace

TEST_CASE("the shape probe names a batch size alike each time and tells sizes apart",
          "[engine][graphs]") {
  auto six = probe_of_batch(6);
  REQUIRE(six);
  CHECK(probe_of_batch(6) == six);
  CHECK(probe_of_batch(6, torch::kFloat, /*head_only=*/true) == six);
  CHECK(probe_of_batch(5) != six);
  CHECK(probe_of_batch(6, torch::kDouble) != six);
}

TEST_CASE("the shape probe reads nothing beyond a walk's head", "[engine][graphs]") {
  auto w = torch::randn({8, 4}).requires_grad_();
  auto loss = torch::mm(torch::randn({6, 8}), w).square().mean();
  bool looked = false;
  look_at_graph([&] { loss.backward(); },
                [&](const backward_nodes& b) {
                  looked = true;
                  std::vector<torch::autograd::Node*> root_only{b.nodes[0], nullptr};
                  CHECK_FALSE(probe_key(backward_nodes{root_only, b.table}));
                  CHECK(probe_key(b));
                });
  CHECK(looked);
}
