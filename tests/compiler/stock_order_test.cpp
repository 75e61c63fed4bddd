// The stock engine's order, simulated: highest sequence number first among
// ready nodes, and gradient sums in arrival order.

#include "compiler/exec_info.hpp"
#include "compiler/lower.hpp"
#include "compiler/stock_order.hpp"

#include <catch2/catch.hpp>

namespace {

using namespace gradd::compiler;

node_info node(const char* name, uint64_t seq, std::vector<edge_ref> edges, size_t inputs) {
  node_info n;
  n.type_name = name;
  n.sequence_nr = seq;
  n.edges = std::move(edges);
  n.inputs.resize(inputs);
  return n;
}

/// root -> 1 -> {2, 3}; 2 -> 4; 3 -> 4: node 4 sums two gradients.
graph fork_join(uint64_t seq2, uint64_t seq3) {
  graph g;
  g.nodes = {node("GraphRoot", 50, {{1, 0}}, 0), node("A", 40, {{2, 0}, {3, 0}}, 1),
             node("B", seq2, {{4, 0}}, 1), node("C", seq3, {{4, 0}}, 1),
             node("D", 5, {}, 1)};
  g.nodes[0].is_root = true;
  return g;
}

} // namespace

TEST_CASE("the ready node with the highest sequence number runs first",
          "[compiler][stock_order]") {
  auto g = fork_join(20, 30);
  mark_needed_nodes(g);
  CHECK(stock_order(g) == std::vector<uint32_t>{0, 1, 3, 2, 4});
  g = fork_join(30, 20);
  mark_needed_nodes(g);
  CHECK(stock_order(g) == std::vector<uint32_t>{0, 1, 2, 3, 4});
}

TEST_CASE("a gradient sum adds its terms in arrival order", "[compiler][stock_order]") {
  auto g = fork_join(20, 30);
  lower_to_node_ops(g);
  const op* sum = nullptr;
  for (const auto& o : g.ops)
    if (o.kind == op_kind::accumulate)
      sum = &o;
  REQUIRE(sum != nullptr);
  // C (node 3) ran first, so its gradient is the first term.
  auto producer_of = [&](value_id v) {
    for (const auto& o : g.ops)
      for (auto r : o.results)
        if (r == v)
          return o.node;
    return no_node;
  };
  CHECK(producer_of(sum->args[0]) == 3);
  CHECK(producer_of(sum->args[1]) == 2);
}

TEST_CASE("with inputs, only nodes on a path to them run", "[compiler][stock_order]") {
  auto g = fork_join(20, 30);
  g.exec_filter = true;
  for (auto& n : g.nodes)
    n.needed = n.is_root;  // as the capture leaves them
  g.nodes[2].captures.push_back({0, 0});  // grad w.r.t. B's input
  g.num_outputs = 1;
  mark_needed_nodes(g);
  CHECK(g.nodes[1].needed);
  CHECK(!g.nodes[2].needed);  // B only captures
  CHECK(!g.nodes[3].needed);
  CHECK(!g.nodes[4].needed);
  CHECK(stock_order(g) == std::vector<uint32_t>{0, 1, 2});
}
