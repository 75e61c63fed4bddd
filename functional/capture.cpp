// Functional capture of one backward (see capture.hpp).
//
// The graph is read and lifted (graph.hpp); then every proxy is pointed at
// the lifted value itself and the nodes run in the order
// compiler::stock_order gives (Note [Stock engine order]), each through
// `apply_with_saved` while a functional recorder is the process's
// PyCompilerInterface. Gradients travel between nodes in the stock engine's
// own InputBuffers, so sums happen where and how the stock engine makes them;
// each one that happens is recorded as an `accumulate` op. Only once every
// node has run does capture update `.grad` and release saved variables.

#include "functional/capture.hpp"

#include "compiler/exec_info.hpp"
#include "compiler/stock_order.hpp"
#include "execute/current_node.hpp"
#include "execute/stock_steps.hpp"
#include "functional/graph.hpp"
#include "functional/passes.hpp"
#include "functional/recorder.hpp"
#include "functional/steps.hpp"

#include <ATen/ThreadLocalState.h>
#include <ATen/core/NamedTensor.h>
#include <c10/core/StreamGuard.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/csrc/autograd/input_buffer.h>
#include <torch/csrc/dynamo/compiled_autograd.h>

#include <mutex>

namespace gradd::functional {

namespace {

namespace ca = torch::dynamo::autograd;
using compiler::no_node;
using compiler::no_value;
using compiler::op_kind;
using compiler::value_id;
using torch::autograd::InputBuffer;
using torch::autograd::Node;
using torch::autograd::variable_list;

/// Serializes captures: the PyCompilerInterface slot is process-wide.
std::mutex& capture_mutex() {
  static std::mutex mutex;
  return mutex;
}

/// How a capture runs its nodes.
struct run_options {
  /// Every node on this stream instead of its own.
  std::optional<c10::Stream> stream;
  /// Record AccumulateGrad nodes from the node itself, without calling them:
  /// their apply_with_saved reads `.grad`, which a training thread may be
  /// writing when the backward is recorded after the fact.
  bool leaves_from_nodes = false;
  /// Per node (walk order), what the nodes a CUDA graph is cut at returned
  /// when the backward ran (cut_at); each is recorded as a `call_node` op
  /// with these outputs instead of being run. Empty: no cuts.
  const std::vector<variable_list>* cut_outputs = nullptr;
};

/// Runs the nodes of `g` in the stock engine's order under the recorder, as
/// Engine::evaluate_function and call_function would.
class capture_run {
 public:
  capture_run(const graph& g, ca::AutogradCompilerCall& call, ca::TraceState& state,
              capture_session& session, recording& rec, const run_options& options)
      : g_(g), call_(call), state_(state), session_(session), rec_(rec), options_(options),
        buffers_(g.ir.nodes.size()), buffer_values_(g.ir.nodes.size()),
        captured_(g.ir.num_outputs), captured_values_(g.ir.num_outputs, no_value) {}

  /// Runs every node. A static order serves: the stock engine counts a
  /// dependency down for each valid edge whether its gradient is defined or
  /// not, so when a node becomes ready never depends on the values.
  void run() {
    execute::current_node_scope current;  // Note [The current node]
    buffers_[0].emplace(variable_list());
    for (uint32_t i : compiler::stock_order(g_.ir)) {
      current.enter(g_.node(i));
      evaluate(i);
    }
  }

  variable_list& captured() { return captured_; }
  const std::vector<value_id>& captured_values() const { return captured_values_; }

 private:
  /// Takes node `i`'s captures and, if it is needed, runs it and routes its
  /// outputs.
  void evaluate(uint32_t i) {
    Node& fn = g_.node(i);
    const auto& info = g_.ir.nodes[i];
    session_.current_node = i;
    InputBuffer inputs = std::move(*buffers_[i]);
    buffers_[i].reset();
    std::vector<value_id> input_values = std::move(buffer_values_[i]);
    auto stream = stream_of(fn);
    c10::OptionalStreamGuard stream_guard{stream};
    execute::wait_for_ready_events(inputs, stream);

    if (!info.captures.empty()) {
      for (const auto& capture : info.captures) {
        captured_[capture.output_index] = inputs.buffer[capture.input_nr];
        captured_values_[capture.output_index] = input_values[capture.input_nr];
      }
      rec_.leaf_nodes.push_back(i);
    }
    if (!info.needed)
      return;

    // No will_release_variables(): a node told so may free buffers its
    // backward consumes, and a capture that fails later must leave the graph
    // runnable by the stock engine. It only ever saves memory.
    variable_list grads = std::move(inputs.buffer);
    if (options_.cut_outputs && cut_at(info, fn)) {
      record_cut(i, std::move(input_values), stream);
      return;
    }
    if (options_.leaves_from_nodes && info.is_accumulate_grad) {
      const auto& variable = static_cast<torch::autograd::AccumulateGrad&>(fn).variable;
      auto o = make_op(op_kind::accumulate_grad, session_.lifted_position(variable));
      o.args.push_back(input_values.empty() ? no_value : input_values[0]);
      session_.emit(std::move(o));
      rec_.leaf_nodes.push_back(i);
      return;
    }
    at::NoNamesGuard no_names;  // as Node::operator() runs every backward
    ca::SwapSavedVariables saved(call_, state_, nullptr,
                                 call_.node_calls.lookup(fn.shared_from_this()));
    variable_list outputs;
    try {
      outputs = fn.apply_with_saved(grads, saved);
    } catch (const c10::NotImplementedError& e) {
      throw_capture_error("node " + fn.name() + " cannot be captured: " +
                          e.what_without_backtrace());
    }
    saved.debug_asserts();
    grads.clear();

    std::vector<value_id> output_values;
    output_values.reserve(outputs.size());
    for (const auto& out : outputs)
      output_values.push_back(session_.value_of(out, "an output"));
    validate_and_record(fn, saved, outputs, output_values);

    if (outputs.empty()) {
      rec_.leaf_nodes.push_back(i);
      return;
    }
    route_outputs(i, outputs, output_values, stream);
  }

  /// Records node `i`, whose input gradients are `input_values`, as one
  /// call_node op returning what it returned when the backward ran (Note
  /// [Piecewise graphs], cuda/piecewise.cpp), and routes that on.
  void record_cut(uint32_t i, std::vector<value_id> input_values,
                  const std::optional<c10::Stream>& stream) {
    Node& fn = g_.node(i);
    auto outputs = options_.cut_outputs->at(i);
    if (outputs.size() != g_.ir.nodes[i].edges.size())
      throw_capture_error("node " + fn.name() + ", which is called live, returned " +
                          std::to_string(outputs.size()) + " gradients when it ran, for " +
                          std::to_string(g_.ir.nodes[i].edges.size()) + " edges");
    auto o = make_op(op_kind::call_node);
    o.target = fn.name();
    o.args = std::move(input_values);
    o.results = session_.define_all(outputs);
    auto output_values = o.results;
    session_.emit(std::move(o));
    route_outputs(i, outputs, output_values, stream);
  }

  /// Routes node `i`'s `outputs` (standing for `output_values`) to the
  /// nodes its edges lead to.
  void route_outputs(uint32_t i, variable_list& outputs, const std::vector<value_id>& output_values,
                     const std::optional<c10::Stream>& stream) {
    const auto& info = g_.ir.nodes[i];
    for (size_t k = 0; k < outputs.size(); ++k) {
      uint32_t target = info.edges[k].target;
      // An invalid edge, or a node that does not execute: the stock engine
      // gives it no input buffer either.
      if (target == no_node || !compiler::should_execute(g_.ir.nodes[target]))
        continue;
      route(target, info.edges[k].input_nr, std::move(outputs[k]), output_values[k], stream);
    }
  }

  /// Runs the stock output check; if it changed a gradient (a cast, a sum to
  /// a broadcast shape), records that as a validate_outputs op.
  void validate_and_record(Node& fn, ca::SwapSavedVariables& saved, variable_list& outputs,
                           std::vector<value_id>& output_values) {
    std::vector<const c10::TensorImpl*> before;
    for (const auto& out : outputs)
      before.push_back(out.defined() ? out.unsafeGetTensorImpl() : nullptr);
    saved.before(fn.next_edges());
    execute::validate_node_outputs(fn, outputs);
    saved.after(fn.next_edges());
    saved.debug_asserts();
    bool changed = false;
    for (size_t k = 0; k < outputs.size(); ++k)
      changed = changed || before[k] != (outputs[k].defined() ? outputs[k].unsafeGetTensorImpl()
                                                               : nullptr);
    if (!changed)
      return;
    auto o = make_op(op_kind::validate_outputs);
    o.args = output_values;
    output_values = session_.define_all(outputs);
    o.results = output_values;
    session_.emit(std::move(o));
  }

  /// Adds a gradient to input `input_nr` of node `target` with the stock
  /// engine's own InputBuffer::add, recording a sum when one happens.
  void route(uint32_t target, uint32_t input_nr, at::Tensor&& grad, value_id value,
             const std::optional<c10::Stream>& producer_stream) {
    Node& next = g_.node(target);
    if (!buffers_[target]) {
      buffers_[target].emplace(next.num_inputs());
      buffer_values_[target].assign(next.num_inputs(), no_value);
    }
    InputBuffer& buffer = *buffers_[target];
    value_id& slot = buffer_values_[target][input_nr];
    bool had_gradient = buffer.buffer[input_nr].defined();
    buffer.add(input_nr, std::move(grad), producer_stream, stream_of(next), &next);
    if (value == no_value)
      return;
    if (!had_gradient) {
      slot = value;
      return;
    }
    auto o = make_op(op_kind::accumulate, -1, target);
    o.args = {slot, value};
    slot = session_.define(buffer.buffer[input_nr]);
    o.results.push_back(slot);
    session_.emit(std::move(o));
  }

  std::optional<c10::Stream> stream_of(Node& fn) const {
    return options_.stream ? options_.stream : fn.stream();
  }

  const graph& g_;
  ca::AutogradCompilerCall& call_;
  ca::TraceState& state_;
  capture_session& session_;
  recording& rec_;
  const run_options& options_;
  std::vector<std::optional<InputBuffer>> buffers_;
  std::vector<std::vector<value_id>> buffer_values_;
  variable_list captured_;
  std::vector<value_id> captured_values_;
};


/// Records the backward of `g`, lifted into `call`, into `rec` by running
/// it: the shared part of capture() and record_lifted(). The `.grad`
/// updates wait in `session`.
void run_lifted(ca::AutogradCompilerCall& call, const graph& g, size_t num_outputs,
                     capture_session& session, recording& rec, const run_options& options) {
  for (const auto& size : call.all_size_inputs)
    rec.sizes.push_back(size.value);
  for (const auto& arg : call.lifted_ivalue_args.args)
    rec.scalars.push_back(*arg.actual_ptr);
  rec.num_lifted = static_cast<uint32_t>(call.tensor_args.inputs.size());

  // Capture by execution: every proxy is the lifted value itself.
  for (const auto& t : call.tensor_args.inputs)
    call.tensor_args.lookup(t).proxy_tensor = t;
  for (auto& arg : call.lifted_ivalue_args.args)
    arg.proxy = *arg.actual_ptr;
  call.lifted_ivalue_args.next = 0;

  session.add_lifted(call.tensor_args.inputs);

  // Static sizes: no node's sizes are swapped for symbolic ones.
  ca::TraceState state(std::vector<std::optional<c10::SymInt>>(call.all_size_inputs.size()),
                       num_outputs);
  capture_run run(g, call, state, session, rec, options);
  {
    ca::PyCompilerGuard guard(make_recorder(session));
    run.run();
  }
  session.current_node = no_node;
  auto out = make_op(op_kind::output);
  out.args = run.captured_values();
  session.emit(std::move(out));
  rec.ir.number_ops();  // payloads are indexed by op id
  refresh_last_uses(rec);
  rec.gradients = std::move(run.captured());
}

} // namespace

recording capture(const std::shared_ptr<Node>& graph_root, const torch::autograd::GraphTask& task,
                  bool accumulate_grad, const torch::autograd::edge_list& outputs) {
  std::lock_guard lock(capture_mutex());
  // The stock engine runs nodes under the TLS the task captured, with grad
  // mode set to create_graph.
  at::ThreadLocalStateGuard tls(task.thread_locals_);
  auto g = read_graph(graph_root, task, accumulate_grad, outputs);

  recording rec;
  rec.ir = g.ir;
  ca::AutogradCompilerCall call(ca::SizeInput::STATIC);
  rec.node_keys = lift_nodes(call, g);
  capture_session session(rec, g);
  run_lifted(call, g, outputs.size(), session, rec, {});

  // Capture succeeded: now what the stock engine would have left behind.
  for (auto& [variable, grad] : session.deferred_accumulations)
    accumulate_into_grad(variable, std::move(grad));
  session.deferred_accumulations.clear();
  finish_backward(g, rec.leaf_nodes, task);
  return rec;
}

recording record_lifted(ca::AutogradCompilerCall& call, const graph& g,
                        const torch::autograd::GraphTask& task, size_t num_outputs,
                        c10::Stream stream, const std::vector<variable_list>& cut_outputs) {
  std::lock_guard lock(capture_mutex());
  at::ThreadLocalStateGuard tls(task.thread_locals_);
  recording rec;
  rec.ir = g.ir;
  capture_session session(rec, g);
  run_lifted(call, g, num_outputs, session, rec,
             {stream, /*leaves_from_nodes=*/true, cut_outputs.empty() ? nullptr : &cut_outputs});
  return rec;
}

} // namespace gradd::functional
