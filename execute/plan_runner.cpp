// The hit path: a plan run over live autograd nodes.
//
// Each step mirrors Engine::evaluate_function and call_function (engine.cpp)
// for one node, minus the bookkeeping a static schedule makes unnecessary: no
// ready queue, no dependency counts, no not_ready map, no lock, no hash
// lookup. Input buffers are indexed by step; a step moves its buffer out, so
// every slot is released at its last use. InputBuffer::add is the stock
// engine's own accumulation, so gradient sums and cross-stream
// synchronization are the stock engine's, in the order the plan fixed.
// What code run by a node can ask the engine is the stock engine's too: the
// node is the current one (Note [The current node]) and a profiler sees the
// engine's "evaluate_function" range around it; the graph task is the one
// libtorch made for this backward (Engine::execute's GraphTaskGuard).

#include "execute/plan_runner.hpp"

#include "execute/current_node.hpp"
#include "execute/plan_trace.hpp"
#include "execute/stock_steps.hpp"

#include <ATen/record_function.h>
#include <c10/core/StreamGuard.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/csrc/autograd/input_buffer.h>

namespace gradd::execute {

namespace {

using torch::autograd::InputBuffer;
using torch::autograd::Node;
using torch::autograd::variable_list;

/// Takes the captured gradients of a step (autograd::grad outputs).
void take_captures(const compiler::plan& p, const compiler::plan_step& step, Node& fn,
                   InputBuffer& inputs, const std::optional<c10::Stream>& stream,
                   torch::autograd::GraphTask& task) {
  // A node that runs is captured before its tensor pre-hooks (they run in
  // call_node), one that only captures after them, as in evaluate_function.
  auto captured = step.runs ? inputs.buffer : call_tensor_pre_hooks(fn, std::move(inputs.buffer));
  for (uint32_t c = 0; c < step.capture_count; ++c) {
    const auto& capture = p.captures[step.first_capture + c];
    task.captured_vars_[capture.output_index] = captured[capture.input_nr];
    if (stream)
      task.leaf_streams.emplace(*stream);
  }
}

} // namespace

bool sequence_order_holds(const compiler::plan& p, const std::vector<Node*>& nodes) noexcept {
  uint64_t previous = 0;
  for (auto i : p.sequence_order) {
    auto current = nodes[i]->sequence_nr();
    if (current < previous)
      return false;
    previous = current;
  }
  return true;
}

void run_plan(const compiler::plan& p, const std::vector<Node*>& nodes,
              torch::autograd::GraphTask& task, output_tap* tap) {
  const bool release = !task.keep_graph_ && !(tap && tap->keep_saved_variables);
  auto& trace = mutable_plan_trace();
  std::vector<InputBuffer> buffers;
  buffers.reserve(p.steps.size());
  for (size_t s = 0; s < p.steps.size(); ++s)
    buffers.emplace_back(0);

  current_node_scope current;
  for (size_t s = 0; s < p.steps.size(); ++s) {
    const auto& step = p.steps[s];
    Node& fn = *nodes[step.node];
    current.enter(fn);
    RECORD_FUNCTION(c10::str("autograd::engine::evaluate_function: ", fn.name()),
                    c10::ArrayRef<const c10::IValue>());
    auto stream = fn.stream();
    c10::OptionalStreamGuard stream_guard{stream};
    auto& inputs = buffers[s];
    wait_for_ready_events(inputs, stream);
    if (step.capture_count > 0 || !step.runs) {
      take_captures(p, step, fn, inputs, stream, task);
      if (!step.runs)
        continue;
    }

    ++trace.node_calls;
    auto outputs = call_function(fn, std::move(inputs.buffer), /*keep_graph=*/!release);
    if (release)
      fn.release_variables();
    if (tap && tap->wanted[step.node])
      tap->outputs[step.node] = outputs;
    if (outputs.empty()) {
      if (stream)
        task.leaf_streams.emplace(*stream); // synced with the caller at the end
      continue;
    }
    TORCH_INTERNAL_ASSERT(outputs.size() == step.route_count,
                          "gradd: plan expects ", step.route_count, " outputs of ",
                          fn.name(), ", got ", outputs.size());
    for (uint32_t i = 0; i < step.route_count; ++i) {
      const auto& r = p.routes[step.first_route + i];
      if (r.step == compiler::no_step)
        continue;
      Node* next = fn.next_edge(i).function.get();
      auto& target = buffers[r.step];
      if (target.buffer.empty())
        target = InputBuffer(next->num_inputs());
      target.add(r.input_nr, std::move(outputs[i]), stream, next->stream(), next);
    }
  }
  ++trace.runs;
}

} // namespace gradd::execute
