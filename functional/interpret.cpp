// The interpreter of a functional recording (see interpret.hpp).
//
// One tensor per value, released right after its last use
// (recording::last_use), so that an op holds the only reference where the
// stock engine's would: AccumulateGrad and in-place sums steal on the same
// conditions.

#include "functional/interpret.hpp"

#include "execute/stock_steps.hpp"
#include "functional/graph.hpp"
#include "functional/steps.hpp"

#include <c10/core/StreamGuard.h>
#include <torch/csrc/autograd/input_buffer.h>

namespace gradd::functional {

using compiler::no_value;
using compiler::op_kind;
using compiler::value_id;
using torch::autograd::Node;
using torch::autograd::variable_list;

namespace {

/// Runs ops [from, end) of `rec`, and the graph inputs before `from`, over
/// `values` (by value id).
program_outputs run(const recording& rec, const std::vector<Node*>& nodes,
                    const std::vector<at::Tensor>& lifted, const interpret_options& options,
                    uint32_t from, std::vector<at::Tensor> values) {
  const auto& ops = rec.ir.ops;
  values.resize(rec.ir.num_values);
  program_outputs out;
  size_t leaf = 0;  // accumulate_grad ops so far
  for (uint32_t i = 0; i < ops.size(); ++i) {
    const auto& o = ops[i];
    if (i < from && o.kind != op_kind::graph_input) {
      leaf += o.kind == op_kind::accumulate_grad;
      continue;
    }
    const auto& payload = rec.payloads.at(o.id);
    Node* node = o.node != compiler::no_node ? nodes.at(o.node) : nullptr;
    auto stream = options.stream ? options.stream : node ? node->stream() : std::nullopt;
    c10::OptionalStreamGuard stream_guard{stream};

    variable_list args;
    args.reserve(o.args.size());
    for (value_id v : o.args)
      args.push_back(v == no_value ? at::Tensor() : values[v]);
    std::vector<c10::IValue> packed;
    for (const auto& arg : payload.packed)
      packed.push_back(arg.rebuild(values));
    for (value_id v : o.args)
      if (v != no_value && rec.last_use[v] == i)
        values[v].reset();

    variable_list results;
    switch (o.kind) {
      case op_kind::graph_input:
        results.push_back(lifted.at(o.index));
        break;
      case op_kind::apply_functional: {
        variable_list grads(std::make_move_iterator(args.begin()),
                            std::make_move_iterator(args.begin() + o.index));
        results = (*payload.fn)(grads, packed);
        break;
      }
      case op_kind::accumulate: {
        // A one-slot InputBuffer sums as the stock engine does, in place
        // when nothing else holds the first gradient.
        torch::autograd::InputBuffer sum(1);
        sum.add(0, std::move(args[0]), stream, stream, node);
        sum.add(0, std::move(args[1]), stream, stream, node);
        results.push_back(std::move(sum.buffer[0]));
        break;
      }
      case op_kind::accumulate_grad:
        if (options.leaves == leaf_gradients::collect) {
          out.leaf_gradients.emplace_back(o.index, std::move(args[0]));
          if (options.after_leaf)
            options.after_leaf(leaf, out.leaf_gradients.back().second);
        } else if (args[0].defined())
          accumulate_into_grad(lifted.at(o.index), std::move(args[0]));
        ++leaf;
        break;
      case op_kind::call_node:
        if (!options.call_node)
          throw_capture_error("replay: node " + o.target + " is called live, and nothing calls it");
        results = options.call_node(i, std::move(args), values);
        break;
      case op_kind::validate_outputs:
        execute::validate_node_outputs(*node, args);
        results = std::move(args);
        break;
      case op_kind::copy_slices_prologue:
        results = copy_slices_prologue(args[0], *payload.base, *payload.view);
        break;
      case op_kind::copy_slices_epilogue:
        results = copy_slices_epilogue(payload.needs_input_grad, args[0],
                                       variable_list(args.begin() + 2, args.end()), args[1]);
        break;
      case op_kind::output:
        out.results = std::move(args);
        break;
      default:
        throw_capture_error(std::string("replay: unexpected op ") + compiler::to_string(o.kind));
    }
    if (results.size() != o.results.size())
      throw_capture_error("replay: " + compiler::kind_text(o) + " returned " +
                          std::to_string(results.size()) + " gradients, recorded " +
                          std::to_string(o.results.size()));
    for (size_t k = 0; k < results.size(); ++k) {
      value_id r = o.results[k];
      if (r != no_value && rec.last_use[r] != i)
        values[r] = std::move(results[k]);
    }
  }
  return out;
}

} // namespace

program_outputs interpret(const recording& rec, const std::vector<Node*>& nodes,
                          const std::vector<at::Tensor>& lifted,
                          const interpret_options& options) {
  return run(rec, nodes, lifted, options, 0, {});
}

program_outputs interpret_rest(const recording& rec, const std::vector<Node*>& nodes,
                               const std::vector<at::Tensor>& lifted,
                               const interpret_options& options, uint32_t from,
                               std::vector<at::Tensor> in_flight) {
  return run(rec, nodes, lifted, options, from, std::move(in_flight));
}

} // namespace gradd::functional
