// A leaf with hooks, lifted for the graph path (Note [Live leaves],
// cuda/backward_graph.cpp): without its hooks' compiled_args, which a C++
// post-hook (DistributedDataParallel's kind) answers by throwing and a
// Python one by touching Python objects. Lifting is the same on every
// device, so this runs on CPU tensors (graph_look.hpp). And the reason a
// structure with hooks elsewhere stays on plans.

#include "cuda/graph_hit.hpp"
#include "cuda/graph_look.hpp"
#include "cuda/shape_key.hpp"

#include <catch2/catch.hpp>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/dynamo/compiled_autograd.h>

#include <optional>

using gradd::cuda::backward_nodes;
using gradd::test::look_at_graph;

namespace {

namespace ca = torch::dynamo::autograd;

/// The graph path's lift of `b` as node table `table` describes it: its
/// shape key and lifted tensors.
std::pair<std::optional<uint64_t>, size_t> lift(const backward_nodes& b,
                                                const gradd::compiler::graph& table) {
  ca::AutogradCompilerCall call(ca::SizeInput::STATIC);
  auto nodes = gradd::functional::lift_nodes_hashed(call, b.nodes, table);
  return {gradd::cuda::shape_key(call, nodes), call.tensor_args.inputs.size()};
}

} // namespace

TEST_CASE("a leaf with a C++ post-hook is lifted without the hook", "[engine][graphs]") {
  auto w = torch::randn({8, 4}).requires_grad_();
  auto loss = torch::mm(torch::randn({6, 8}), w).square().mean();
  size_t calls = 0;
  bool looked = false;
  look_at_graph([&] { loss.backward(); },
                [&](const backward_nodes& b) {
                  looked = true;
                  auto plain = lift(b, b.table);
                  // The hook arrives once the graph is read: libtorch's own
                  // lift then reaches it, and it throws.
                  auto accumulator = torch::autograd::impl::grad_accumulator(w);
                  accumulator->add_post_hook(
                      std::make_unique<torch::autograd::utils::LambdaPostHook>(
                          [&calls](const torch::autograd::variable_list& outputs,
                                   const torch::autograd::variable_list&) {
                            ++calls;
                            return outputs;
                          }));
                  CHECK_THROWS(lift(b, b.table));
                  auto hooked_table = b.table;
                  for (auto& info : hooked_table.nodes)
                    if (info.is_accumulate_grad)
                      info.hooks.post = 1;
                  std::pair<std::optional<uint64_t>, size_t> hooked;
                  REQUIRE_NOTHROW(hooked = lift(b, hooked_table));
                  CHECK(hooked.first);
                  CHECK(hooked.second == plain.second);  // the same tensors lifted
                  CHECK(lift(b, hooked_table).first == hooked.first);
                });
  CHECK(looked);
  CHECK(calls == 0);  // lifting calls no hook
}

TEST_CASE("hooked nodes a replay calls live are cut; those taken as results are named",
          "[engine][graphs]") {
  auto node = [](const std::string& type, gradd::compiler::hook_counts hooks,
                 bool accumulate_grad = false) {
    gradd::compiler::node_info info;
    info.type_name = type;
    info.hooks = hooks;
    info.is_accumulate_grad = accumulate_grad;
    return info;
  };
  gradd::compiler::graph table;
  table.nodes.push_back(node("torch::autograd::GraphRoot", {}));
  table.nodes[0].is_root = true;
  table.nodes.push_back(node("torch::autograd::AccumulateGrad", {0, 0, 0, 1, 1}, true));
  CHECK_FALSE(gradd::cuda::hooks_inside_graph(table));  // a leaf's hooks run live
  CHECK(gradd::cuda::cut_count(table) == 0);
  table.nodes.push_back(node("torch::autograd::generated::GeluBackward0", {1, 0, 0, 0, 0}));
  table.nodes.push_back(node("torch::autograd::PyNode", {}));
  CHECK_FALSE(gradd::cuda::hooks_inside_graph(table));  // cut: called live between pieces
  CHECK(gradd::cuda::cut_count(table) == 2);
  CHECK(gradd::cuda::calls_nodes_live(table));
  // Taken as an autograd::grad result, a node is no cut: its hooks would
  // change what the backward returns from inside a graph.
  table.nodes[2].captures.push_back({0, 0});
  CHECK(gradd::cuda::hooks_inside_graph(table) == "node 2 (GeluBackward0) has hooks");
  CHECK(gradd::cuda::cut_count(table) == 1);
  for (int k = 0; k < 5; ++k) {
    table.nodes.push_back(node("torch::autograd::generated::AddBackward0", {0, 1, 0, 0, 0}));
    table.nodes.back().captures.push_back({0, static_cast<uint32_t>(k + 1)});
  }
  CHECK(gradd::cuda::hooks_inside_graph(table)
        == "nodes 2 (GeluBackward0), 4 (AddBackward0), 5 (AddBackward0), 6 (AddBackward0) "
           "and 2 more have hooks");
  table.nodes[2].needed = false;
  table.nodes[2].captures.clear();  // runs no more, captures nothing: its hooks do not matter
  CHECK(gradd::cuda::hooks_inside_graph(table)
        == "nodes 4 (AddBackward0), 5 (AddBackward0), 6 (AddBackward0), 7 (AddBackward0) "
           "and 1 more have hooks");
}
