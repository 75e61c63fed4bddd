// Lowering a captured node table to node-level ops.
//
// Each input of each node is a slot holding the value of the gradient summed
// so far. Nodes are visited in stock-engine order (stock_order.hpp); a node's
// outputs flow along its edges into the successors' slots, and a second
// arrival at a slot becomes an `accumulate` op, so the sums in the program
// add their terms in the order the stock engine's InputBuffer does. Hooks
// appear where the stock engine calls them (engine.cpp: call_function).

#include "compiler/lower.hpp"

#include "compiler/exec_info.hpp"
#include "compiler/stock_order.hpp"

namespace gradd::compiler {

namespace {

std::vector<value_id> fresh_values(graph& g, size_t count) {
  std::vector<value_id> values(count);
  for (auto& v : values)
    v = g.new_value();
  return values;
}

/// Emits a hook op of `kind` over `values` and returns its results.
std::vector<value_id> emit_hook(graph& g, uint32_t node, op_kind kind,
                                std::vector<value_id> values) {
  op hook{kind, "", node, -1, std::move(values), {}};
  hook.results = fresh_values(g, hook.args.size());
  auto results = hook.results;
  g.ops.push_back(std::move(hook));
  return results;
}

} // namespace

std::string check_node_table(const graph& g) {
  if (g.nodes.empty())
    return "no nodes";
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const auto& n = g.nodes[i];
    auto where = "node " + std::to_string(i) + ": ";
    for (const auto& e : n.edges) {
      if (e.target == no_node)
        continue;
      // The root starts the walk; an edge back to it would run it twice.
      if (e.target == 0 || e.target >= g.nodes.size())
        return where + "an edge to node " + std::to_string(e.target);
      if (e.input_nr >= g.nodes[e.target].inputs.size())
        return where + "an edge to input " + std::to_string(e.input_nr) + " of node "
               + std::to_string(e.target);
    }
    for (const auto& c : n.captures)
      if (c.input_nr >= n.inputs.size() || c.output_index >= g.num_outputs)
        return where + "a capture of input " + std::to_string(c.input_nr) + " into output "
               + std::to_string(c.output_index);
  }
  return {};
}

void lower_to_node_ops(graph& g) {
  g.ops.clear();
  g.num_values = 1;
  mark_needed_nodes(g);
  std::vector<std::vector<value_id>> slots(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    slots[i].assign(g.nodes[i].inputs.size(), no_value);
  std::vector<value_id> outputs(g.num_outputs, no_value);

  for (auto id : stock_order(g)) {
    const auto& n = g.nodes[id];
    auto inputs = std::move(slots[id]);
    bool tensor_hooks = n.hooks.tensor_pre + n.hooks.retains_grad > 0;
    // The stock engine captures a node that runs before its tensor pre-hooks,
    // and one that only captures after them (engine.cpp, evaluate_function).
    if (!n.needed) {
      if (tensor_hooks)
        inputs = emit_hook(g, id, op_kind::tensor_pre_hook, std::move(inputs));
      for (const auto& c : n.captures)
        outputs[c.output_index] = inputs[c.input_nr];
      continue;
    }
    for (const auto& c : n.captures)
      outputs[c.output_index] = inputs[c.input_nr];
    if (tensor_hooks)
      inputs = emit_hook(g, id, op_kind::tensor_pre_hook, std::move(inputs));
    if (n.hooks.pre > 0)
      inputs = emit_hook(g, id, op_kind::pre_hook, std::move(inputs));
    if (n.is_accumulate_grad) {
      // AccumulateGrad calls its post-accumulate-grad hook itself, before the
      // engine's post hooks (which see no outputs).
      g.ops.push_back({op_kind::accumulate_grad, "", id, -1, inputs, {}});
      if (n.hooks.post_acc_grad > 0)
        g.ops.push_back({op_kind::post_acc_grad_hook, "", id, -1, {}, {}});
      if (n.hooks.post > 0)
        g.ops.push_back({op_kind::post_hook, "", id, 0, inputs, {}});
      continue;
    }
    op call{op_kind::call_node, n.type_name, id, -1, inputs, {}};
    call.results = fresh_values(g, n.edges.size());
    auto results = call.results;
    g.ops.push_back(std::move(call));
    if (!results.empty()) {
      op validate{op_kind::validate_outputs, "", id, -1, std::move(results), {}};
      validate.results = fresh_values(g, validate.args.size());
      results = validate.results;
      g.ops.push_back(std::move(validate));
    }
    if (n.hooks.post > 0) {
      op post{op_kind::post_hook, "", id, static_cast<int64_t>(results.size()),
              results, {}};  // index: how many args are outputs
      post.args.insert(post.args.end(), inputs.begin(), inputs.end());
      post.results = fresh_values(g, results.size());
      results = post.results;
      g.ops.push_back(std::move(post));
    }
    for (size_t i = 0; i < n.edges.size(); ++i) {
      const auto& e = n.edges[i];
      if (e.target == no_node || !should_execute(g.nodes[e.target]))
        continue;
      auto& slot = slots[e.target][e.input_nr];
      if (slot == no_value) {
        slot = results[i];
      } else {
        auto sum = g.new_value();
        g.ops.push_back({op_kind::accumulate, "", e.target, e.input_nr,
                         {slot, results[i]}, {sum}});
        slot = sum;
      }
    }
  }
  if (g.num_outputs > 0)
    g.ops.push_back({op_kind::output, "", no_node, -1, outputs, {}});
  g.ops.push_back({op_kind::final_callbacks, "", no_node, -1, {}, {}});
}

} // namespace gradd::compiler
