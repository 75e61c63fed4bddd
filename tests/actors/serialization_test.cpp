// The IR, plans and pipeline messages survive CAF's binary serialization
// unchanged: what the daemon will send over the network.

#include "actors/errors.hpp"
#include "actors/messages.hpp"
#include "compiler/lower.hpp"
#include "compiler/plan.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include <catch2/catch.hpp>

#include <tuple>
#include <utility>

namespace {

using namespace gradd::compiler;
using gradd::actors::errc;

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

// -- every field non-default --------------------------------------------------

// The fields of each serialized type, in declaration order. A structured
// binding names every member, so adding or removing one stops this file
// compiling: then give the new field a value other than its default in the
// fixtures below and list it here (and in the type's inspect).

auto fields(tensor_meta& x) {
  auto& [sizes, dtype, device, known] = x;
  return std::tie(sizes, dtype, device, known);
}

auto fields(edge_ref& x) {
  auto& [target, input_nr] = x;
  return std::tie(target, input_nr);
}

auto fields(capture_ref& x) {
  auto& [input_nr, output_index] = x;
  return std::tie(input_nr, output_index);
}

auto fields(hook_counts& x) {
  auto& [tensor_pre, retains_grad, pre, post, post_acc_grad] = x;
  return std::tie(tensor_pre, retains_grad, pre, post, post_acc_grad);
}

auto fields(node_info& x) {
  auto& [type_name, sequence_nr, is_root, is_accumulate_grad, needed, edges, captures, inputs,
         hooks] = x;
  return std::tie(type_name, sequence_nr, is_root, is_accumulate_grad, needed, edges, captures,
                  inputs, hooks);
}

auto fields(op& x) {
  auto& [kind, target, node, index, args, results, meta, id, input, custom_function] = x;
  return std::tie(kind, target, node, index, args, results, meta, id, input, custom_function);
}

auto fields(graph& x) {
  auto& [nodes, ops, num_values, num_outputs, keep_graph, accumulate_grad, exec_filter] = x;
  return std::tie(nodes, ops, num_values, num_outputs, keep_graph, accumulate_grad, exec_filter);
}

auto fields(route& x) {
  auto& [step, input_nr] = x;
  return std::tie(step, input_nr);
}

auto fields(plan_step& x) {
  auto& [node, runs, first_route, route_count, first_capture, capture_count] = x;
  return std::tie(node, runs, first_route, route_count, first_capture, capture_count);
}

auto fields(plan& x) {
  auto& [steps, routes, captures, sequence_order, num_nodes, num_outputs] = x;
  return std::tie(steps, routes, captures, sequence_order, num_nodes, num_outputs);
}

template <class Job>
auto job_fields(Job& x) {
  auto& [graph_id, ir] = x;
  return std::tie(graph_id, ir);
}

auto fields(gradd::actors::capture_job& x) { return job_fields(x); }
auto fields(gradd::actors::pass_job& x) { return job_fields(x); }
auto fields(gradd::actors::compile_job& x) { return job_fields(x); }

auto fields(gradd::actors::compile_result& x) {
  auto& [graph_id, ir, plan, error] = x;
  return std::tie(graph_id, ir, plan, error);
}

auto fields(gradd::actors::compile_counts& x) {
  auto& [settled, compiles] = x;
  return std::tie(settled, compiles);
}

/// Calls `check(i, a_i, b_i)` for each field `i` of `a` and `b`.
template <class T, class Check>
void for_each_field(T& a, T& b, Check check) {
  auto x = fields(a);
  auto y = fields(b);
  [&]<size_t... I>(std::index_sequence<I...>) {
    (check(I, std::get<I>(x), std::get<I>(y)), ...);
  }(std::make_index_sequence<std::tuple_size_v<decltype(x)>>{});
}

/// Requires every field of `set` to differ from the same field of `unset`.
template <class T>
void require_every_field_differs(T set, T unset) {
  for_each_field(set, unset, [](size_t i, const auto& a, const auto& b) {
    INFO("field " << i << " is at its default");
    bool is_default = a == b;  // as a bool: Catch cannot print the IR's vectors
    REQUIRE_FALSE(is_default);
  });
}

/// Requires `copy` to equal `original` field by field.
template <class T>
void require_equal_fields(T original, T copy) {
  for_each_field(original, copy, [](size_t i, const auto& sent, const auto& received) {
    INFO("field " << i << " changed on the way");
    bool same = sent == received;
    REQUIRE(same);
  });
}

// Distinct values everywhere, none of them a default: a field the wire
// format drops comes back as its default and differs.

tensor_meta odd_meta() { return {{2, 3}, "half", "cuda:1", false}; }

edge_ref odd_edge() { return {5, 2}; }

capture_ref odd_capture() { return {3, 4}; }

hook_counts odd_hooks() { return {1, 2, 3, 4, 5}; }

node_info odd_node() {
  return {"torch::autograd::generated::MulBackward0", 17, true, true, false,
          {odd_edge(), edge_ref{}}, {odd_capture()}, {odd_meta(), tensor_meta{}}, odd_hooks()};
}

/// An op's default `meta` is unknown and empty, so this one is known and full.
op odd_op() {
  return {op_kind::accumulate, "MulBackward0", 6, 1, {1, 2}, {3}, {{4}, "double", "cpu", true}, 9,
          input_kind::scalar, true};
}

graph odd_graph() {
  return {{odd_node(), node_info{}}, {odd_op(), op{}}, 11, 2, true, false, true};
}

route odd_route() { return {7, 1}; }

plan_step odd_step() { return {3, false, 4, 2, 5, 1}; }

plan odd_plan() {
  return {{odd_step(), plan_step{}}, {odd_route(), route{}}, {odd_capture()}, {2, 0, 1}, 4, 2};
}

/// Requires that `fixture` sets every field and comes back equal.
template <class T>
void require_round_trip_of_every_field(const T& fixture) {
  require_every_field_differs(fixture, T{});
  require_equal_fields(fixture, round_trip(fixture));
}

} // namespace

TEST_CASE("IR and plans round-trip through CAF's binary serializer", "[actors][serialization]") {
  auto g = captured_like();
  CHECK(round_trip(g) == g);
  auto p = build_plan(g);
  CHECK(round_trip(p) == p);
  gradd::actors::compile_result result{7, g, p, make_error(errc::timed_out, "late")};
  auto copy = round_trip(result);
  CHECK(copy.graph_id == 7);
  CHECK(copy.ir == g);
  CHECK(copy.plan == p);
  CHECK(is(copy.error, errc::timed_out));
  CHECK(gradd::actors::what(copy.error) == "late");
}

TEST_CASE("every field of the IR and plan types survives serialization",
          "[actors][serialization]") {
  require_round_trip_of_every_field(odd_meta());
  require_round_trip_of_every_field(odd_edge());
  require_round_trip_of_every_field(odd_capture());
  require_round_trip_of_every_field(odd_hooks());
  require_round_trip_of_every_field(odd_node());
  require_round_trip_of_every_field(odd_op());
  require_round_trip_of_every_field(odd_graph());
  require_round_trip_of_every_field(odd_route());
  require_round_trip_of_every_field(odd_step());
  require_round_trip_of_every_field(odd_plan());
  require_every_field_differs(odd_op().meta, op{}.meta);  // not tensor_meta{}'s defaults
  // Their operator== is defaulted, so it compares every field too.
  CHECK(round_trip(odd_graph()) == odd_graph());
  CHECK(round_trip(odd_plan()) == odd_plan());
}

TEST_CASE("every field of the pipeline messages survives serialization",
          "[actors][serialization]") {
  require_round_trip_of_every_field(gradd::actors::capture_job{3, odd_graph()});
  require_round_trip_of_every_field(gradd::actors::pass_job{4, odd_graph()});
  require_round_trip_of_every_field(gradd::actors::compile_job{5, odd_graph()});
  require_round_trip_of_every_field(
      gradd::actors::compile_result{6, odd_graph(), odd_plan(),
                                    make_error(errc::compile_failed, "pass dce: broke")});
  require_round_trip_of_every_field(gradd::actors::compile_counts{2, 1});
}
