#pragma once

// CAF `inspect` overloads for the IR and plan types, so the stages (and later
// the daemon) can ship them unchanged. The field lists are the wire format.

#include "compiler/ir.hpp"
#include "compiler/plan.hpp"

#include <caf/meta/type_name.hpp>

namespace gradd::compiler {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tensor_meta& x) {
  return f(caf::meta::type_name("gradd.tensor_meta"), x.sizes, x.dtype, x.device, x.known);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, edge_ref& x) {
  return f(caf::meta::type_name("gradd.edge_ref"), x.target, x.input_nr);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, capture_ref& x) {
  return f(caf::meta::type_name("gradd.capture_ref"), x.input_nr, x.output_index);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, hook_counts& x) {
  return f(caf::meta::type_name("gradd.hook_counts"), x.tensor_pre, x.retains_grad, x.pre,
           x.post, x.post_acc_grad);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_info& x) {
  return f(caf::meta::type_name("gradd.node_info"), x.type_name, x.sequence_nr, x.is_root,
           x.is_accumulate_grad, x.needed, x.edges, x.captures, x.inputs, x.hooks);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, op& x) {
  return f(caf::meta::type_name("gradd.op"), x.kind, x.target, x.node, x.index, x.args,
           x.results, x.meta, x.id, x.input, x.custom_function);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, graph& x) {
  return f(caf::meta::type_name("gradd.graph"), x.nodes, x.ops, x.num_values, x.num_outputs,
           x.keep_graph, x.accumulate_grad, x.exec_filter);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, route& x) {
  return f(caf::meta::type_name("gradd.route"), x.step, x.input_nr);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, plan_step& x) {
  return f(caf::meta::type_name("gradd.plan_step"), x.node, x.runs, x.first_route,
           x.route_count, x.first_capture, x.capture_count);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, plan& x) {
  return f(caf::meta::type_name("gradd.plan"), x.steps, x.routes, x.captures,
           x.sequence_order, x.num_nodes, x.num_outputs);
}

} // namespace gradd::compiler
