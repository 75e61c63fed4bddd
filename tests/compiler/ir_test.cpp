// The IR's text form and verifier, on hand-built graphs.

#include "compiler/ir.hpp"
#include "compiler/lower.hpp"
#include "compiler/plan.hpp"

#include <catch2/catch.hpp>

#include <sstream>

namespace {

using namespace gradd::compiler;

/// root -> mul -> {acc(a), acc(b)}, mul also feeding a twice-used leaf.
graph diamond() {
  graph g;
  g.nodes.resize(4);
  g.nodes[0] = {"GraphRoot", 100, true, false, true, {{1, 0}}, {}, {}, {}};
  g.nodes[1] = {"MulBackward0", 10, false, false, true, {{2, 0}, {3, 0}},
                {}, {tensor_meta{{4}, "double", "cpu"}}, {}};
  g.nodes[2] = {"AccumulateGrad", UINT64_MAX, false, true, true, {}, {}, {tensor_meta{{4}, "double", "cpu"}}, {}};
  g.nodes[3] = {"AccumulateGrad", UINT64_MAX, false, true, true, {}, {}, {tensor_meta{{4}, "double", "cpu"}}, {}};
  lower_to_node_ops(g);
  return g;
}

} // namespace

TEST_CASE("lowering writes one op per node call, in text form", "[compiler][ir]") {
  auto text = to_text(diamond());
  CHECK(text ==
        "graph(keep_graph=false, accumulate_grad=true, nodes=4, outputs=0)\n"
        "  %1 = call_node[GraphRoot]()  ; node 0 inputs ()\n"
        "  %2 = validate_outputs(%1)  ; node 0\n"
        "  %3, %4 = call_node[MulBackward0](%2)  ; node 1 inputs (double[4]@cpu)\n"
        "  %5, %6 = validate_outputs(%3, %4)  ; node 1\n"
        "  accumulate_grad(%5)  ; node 2\n"
        "  accumulate_grad(%6)  ; node 3\n"
        "  final_callbacks()\n");
  CHECK(!verify(diamond()));
}

TEST_CASE("the verifier names the op that uses a value before its definition",
          "[compiler][ir]") {
  auto g = diamond();
  std::swap(g.ops[2], g.ops[3]);  // validate before the call it validates
  std::ostringstream why;
  REQUIRE(verify(g, &why));
  CHECK(why.str() == "op 2 (validate_outputs): uses %3 before its definition");
  CHECK_THROWS_WITH(build_plan(g), Catch::Contains("uses %3 before its definition"));
}

TEST_CASE("the verifier rejects a value defined twice and a wrong arity", "[compiler][ir]") {
  auto g = diamond();
  g.ops[3].results[0] = 1;
  std::ostringstream why;
  REQUIRE(verify(g, &why));
  CHECK_THAT(why.str(), Catch::Contains("defines %1 a second time"));
  g = diamond();
  g.ops[4].args.push_back(5);
  why.str("");
  REQUIRE(verify(g, &why));
  CHECK(why.str() == "op 4 (accumulate_grad): expected 1 args, got 2");
}

TEST_CASE("a plan routes each output to the step of its target", "[compiler][plan]") {
  auto p = build_plan(diamond());
  REQUIRE(p.steps.size() == 4);
  CHECK(p.steps[1].node == 1);
  REQUIRE(p.steps[1].route_count == 2);
  CHECK(p.routes[p.steps[1].first_route] == route{2, 0});
  CHECK(p.routes[p.steps[1].first_route + 1] == route{3, 0});
  CHECK(p.sequence_order == std::vector<uint32_t>{1});
}
