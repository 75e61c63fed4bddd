// Functional replay of a recorded backward (see replay.hpp).
//
// Every check comes before the first op runs, so a refused graph is left to
// the stock engine untouched. The interpreter keeps one tensor per value and
// lets go of each right after its last use (recording::last_use), so that
// an op holds the only reference where the stock engine's would:
// AccumulateGrad and in-place sums steal on the same conditions.

#include "engine/functional/replay.hpp"

#include "engine/detail/stock_steps.hpp"
#include "engine/functional/graph.hpp"
#include "engine/functional/steps.hpp"

#include <ATen/ThreadLocalState.h>
#include <ATen/core/NamedTensor.h>
#include <c10/core/StreamGuard.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/csrc/autograd/input_buffer.h>
#include <torch/csrc/dynamo/compiled_autograd.h>

namespace gradd::engine::functional {

namespace {

namespace ca = torch::dynamo::autograd;
using compiler::no_value;
using compiler::op_kind;
using compiler::value_id;
using torch::autograd::Node;
using torch::autograd::variable_list;

bool same_scalar(const c10::IValue& a, const c10::IValue& b) {
  if (a.isInt() && b.isInt())
    return a.toInt() == b.toInt();
  if (a.isDouble() && b.isDouble())
    return a.toDouble() == b.toDouble();
  if (a.isSymInt() && b.isSymInt())
    return a.toSymInt() == b.toSymInt();
  return false;
}

/// Refuses a graph that does not specialize as the recorded one did.
void check_matches(const recording& rec, const graph& g, const ca::AutogradCompilerCall& call,
                   const std::vector<std::string>& keys) {
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i] != rec.node_keys[i])
      throw_capture_error("replay: node " + std::to_string(i) + " (" + g.node(i).name() +
                          ") differs from the recorded one");
  if (call.tensor_args.inputs.size() != rec.num_lifted ||
      call.all_size_inputs.size() != rec.sizes.size() ||
      call.lifted_ivalue_args.args.size() != rec.scalars.size())
    throw_capture_error("replay: the graph lifts different inputs");
  for (size_t i = 0; i < rec.sizes.size(); ++i)
    if (call.all_size_inputs[i].value != rec.sizes[i])
      throw_capture_error("replay: a size changed (" + std::to_string(rec.sizes[i]) + " -> " +
                          std::to_string(call.all_size_inputs[i].value) + ")");
  for (size_t i = 0; i < rec.scalars.size(); ++i)
    if (!same_scalar(*call.lifted_ivalue_args.args[i].actual_ptr, rec.scalars[i]))
      throw_capture_error("replay: a lifted scalar changed");
}

/// Runs the ops of `rec` over the tensors `lifted`; returns the `output` op's
/// arguments.
variable_list interpret(const recording& rec, const graph& g,
                        const std::vector<at::Tensor>& lifted) {
  const auto& ops = rec.ir.ops;
  std::vector<at::Tensor> values(rec.ir.num_values);
  variable_list results;
  for (uint32_t i = 0; i < ops.size(); ++i) {
    const auto& o = ops[i];
    const auto& payload = rec.payloads.at(o.id);
    Node* node = o.node != compiler::no_node ? &g.node(o.node) : nullptr;
    auto stream = node ? node->stream() : std::nullopt;
    c10::OptionalStreamGuard stream_guard{stream};

    variable_list args;
    args.reserve(o.args.size());
    for (value_id v : o.args)
      args.push_back(v == no_value ? at::Tensor() : values[v]);
    std::vector<c10::IValue> packed;
    for (const auto& arg : payload.packed)
      packed.push_back(arg.rebuild(values));
    // Let go of values at their last use, so that the op holds the only
    // reference where the stock engine would (AccumulateGrad steals then).
    for (value_id v : o.args)
      if (v != no_value && rec.last_use[v] == i)
        values[v].reset();

    variable_list outs;
    switch (o.kind) {
      case op_kind::graph_input:
        outs.push_back(lifted.at(o.index));
        break;
      case op_kind::apply_functional: {
        variable_list grads(std::make_move_iterator(args.begin()),
                            std::make_move_iterator(args.begin() + o.index));
        outs = (*payload.fn)(grads, packed);
        break;
      }
      case op_kind::accumulate: {
        // A one-slot InputBuffer sums as the stock engine does, in place
        // when nothing else holds the first gradient.
        torch::autograd::InputBuffer sum(1);
        sum.add(0, std::move(args[0]), stream, stream, node);
        sum.add(0, std::move(args[1]), stream, stream, node);
        outs.push_back(std::move(sum.buffer[0]));
        break;
      }
      case op_kind::accumulate_grad:
        if (args[0].defined())
          accumulate_into_grad(lifted.at(o.index), std::move(args[0]));
        break;
      case op_kind::validate_outputs:
        detail::validate_node_outputs(*node, args);
        outs = std::move(args);
        break;
      case op_kind::copy_slices_prologue:
        outs = copy_slices_prologue(args[0], *payload.base, *payload.view);
        break;
      case op_kind::copy_slices_epilogue:
        outs = copy_slices_epilogue(payload.needs_input_grad, args[0],
                                    variable_list(args.begin() + 2, args.end()), args[1]);
        break;
      case op_kind::output:
        results = std::move(args);
        break;
      default:
        throw_capture_error(std::string("replay: unexpected op ") + compiler::to_string(o.kind));
    }
    if (outs.size() != o.results.size())
      throw_capture_error(std::string("replay: ") + compiler::to_string(o.kind) + "[" + o.target +
                          "] returned " + std::to_string(outs.size()) + " gradients, recorded " +
                          std::to_string(o.results.size()));
    for (size_t k = 0; k < outs.size(); ++k) {
      value_id r = o.results[k];
      if (r != no_value && rec.last_use[r] != i)
        values[r] = std::move(outs[k]);
    }
  }
  return results;
}

} // namespace

variable_list replay(const recording& rec, const std::shared_ptr<Node>& graph_root,
                     const torch::autograd::GraphTask& task, bool accumulate_grad,
                     const torch::autograd::edge_list& outputs) {
  at::ThreadLocalStateGuard tls(task.thread_locals_);
  at::NoNamesGuard no_names;
  auto g = read_graph(graph_root, task, accumulate_grad, outputs);
  if (accumulate_grad != rec.ir.accumulate_grad)
    throw_capture_error("replay: backward() and autograd::grad() do not share a recording");
  if (g.ir.nodes.size() != rec.ir.nodes.size())
    throw_capture_error("replay: the graph has " + std::to_string(g.ir.nodes.size()) +
                        " nodes, the recording " + std::to_string(rec.ir.nodes.size()));

  ca::AutogradCompilerCall call(ca::SizeInput::STATIC);
  auto keys = lift_nodes(call, g);
  check_matches(rec, g, call, keys);
  auto results = interpret(rec, g, call.tensor_args.inputs);
  finish_backward(g, rec.leaf_nodes, task);
  return results;
}

} // namespace gradd::engine::functional
