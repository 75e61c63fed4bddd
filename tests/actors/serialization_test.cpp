// The IR, plans and pipeline messages survive CAF's binary serialization
// unchanged: what the daemon will send over the network.

#include "actors/messages.hpp"
#include "compiler/lower.hpp"
#include "compiler/plan.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include <catch2/catch.hpp>

namespace {

using namespace gradd::compiler;

graph captured_like() {
  graph g;
  node_info root;
  root.type_name = "torch::autograd::GraphRoot";
  root.is_root = true;
  root.sequence_nr = 9;
  root.edges = {{1, 0}};
  node_info mul;
  mul.type_name = "torch::autograd::generated::MulBackward0";
  mul.sequence_nr = 4;
  mul.edges = {{2, 0}, {edge_ref{}}};
  mul.inputs = {tensor_meta{{2, 3}, "float", "cuda:0", true}};
  mul.hooks.pre = 2;
  node_info acc;
  acc.type_name = "torch::autograd::AccumulateGrad";
  acc.sequence_nr = UINT64_MAX;
  acc.is_accumulate_grad = true;
  acc.inputs = {tensor_meta{{}, {}, {}, false}};
  g.nodes = {root, mul, acc};
  lower_to_node_ops(g);
  g.number_ops();
  return g;
}

template <class T>
T round_trip(const T& value) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  std::vector<char> buffer;
  caf::binary_serializer sink{sys, buffer};
  auto copy = value;
  REQUIRE(!sink(copy));
  REQUIRE(!buffer.empty());
  T result;
  caf::binary_deserializer source{sys, buffer};
  REQUIRE(!source(result));
  return result;
}

} // namespace

TEST_CASE("IR and plans round-trip through CAF's binary serializer", "[actors][serialization]") {
  auto g = captured_like();
  CHECK(round_trip(g) == g);
  auto p = build_plan(g);
  CHECK(round_trip(p) == p);
  gradd::actors::compile_result result{7, true, g, p, "none"};
  auto copy = round_trip(result);
  CHECK(copy.graph_id == 7);
  CHECK(copy.ir == g);
  CHECK(copy.plan == p);
  CHECK(copy.ok);
  CHECK(copy.error == "none");
}
