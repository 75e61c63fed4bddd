// Functional replay of a recorded backward (see replay.hpp).
//
// Every check comes before the first op runs, so a refused graph is left to
// the stock engine untouched; then the interpreter (interpret.hpp) runs it.

#include "functional/replay.hpp"

#include "functional/graph.hpp"
#include "functional/interpret.hpp"

#include <ATen/ThreadLocalState.h>
#include <ATen/core/NamedTensor.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/csrc/dynamo/compiled_autograd.h>

namespace gradd::functional {

namespace {

namespace ca = torch::dynamo::autograd;
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
  auto results = interpret(rec, g.walk.nodes, call.tensor_args.inputs).results;
  finish_backward(g, rec.leaf_nodes, task);
  return results;
}

} // namespace gradd::functional
