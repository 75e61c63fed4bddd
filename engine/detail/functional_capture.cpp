// Functional capture and replay of one backward.
//
// Both start the same way: a depth-first walk from the root lists the nodes
// that run or capture, and one pass of `compiled_args` over them, in that
// order, lifts their tensors, sizes and scalars into an AutogradCompilerCall.
// Capture then points every proxy at the lifted value itself and simulates the
// stock engine: a priority queue on sequence_nr, fed in the stock engine's
// push order, pops the nodes whose input buffers are complete; each runs
// through `apply_with_saved` while a functional_recorder is the process's
// PyCompilerInterface. The recorder runs each functional it is handed and
// appends an op for it; a table from TensorImpl to value id ties the tensors
// flowing between nodes to the IR's values. Replay checks each node's
// specialization key against the recorded one and interprets the ops over a
// table of tensors that lets go of each value after its last use.

#include "engine/detail/functional_capture.hpp"

#include <ATen/DeviceAccelerator.h>
#include <ATen/ThreadLocalState.h>
#include <ATen/core/NamedTensor.h>
#include <c10/core/GradMode.h>
#include <c10/core/StreamGuard.h>
#include <c10/util/Exception.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/autograd/anomaly_mode.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/csrc/autograd/input_buffer.h>
#include <torch/csrc/dynamo/compiled_autograd.h>

#include <mutex>
#include <queue>
#include <shared_mutex>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

namespace gradd::engine::detail {

namespace {

namespace ca = torch::dynamo::autograd;
using compiler::no_node;
using compiler::no_value;
using compiler::op_kind;
using compiler::value_id;
using torch::autograd::functional_apply_t;
using torch::autograd::GraphTask;
using torch::autograd::InputBuffer;
using torch::autograd::Node;
using torch::autograd::variable_list;

[[noreturn]] void fail(const std::string& why) {
  throw std::runtime_error("gradd functional capture: " + why);
}

compiler::op make_op(op_kind kind, int64_t index = -1, uint32_t node = no_node) {
  compiler::op o;
  o.kind = kind;
  o.index = index;
  o.node = node;
  return o;
}

/// The message of `e` without libtorch's backtrace.
std::string message_of(const std::exception& e) {
  if (auto* error = dynamic_cast<const c10::Error*>(&e))
    return error->what_without_backtrace();
  return e.what();
}

/// The functional backwards bound in this process, by name. A generated node
/// binds its functional only the first time it runs under any
/// PyCompilerInterface, so the registry lives as long as the process.
class functional_registry {
 public:
  static functional_registry& instance() {
    static functional_registry registry;
    return registry;
  }

  void bind(const std::string& name, functional_apply_t fn) {
    auto entry = std::make_shared<const functional_apply_t>(std::move(fn));
    std::unique_lock lock(mutex_);
    functions_[name] = std::move(entry);
  }

  std::shared_ptr<const functional_apply_t> find(const std::string& name) const {
    std::shared_lock lock(mutex_);
    auto it = functions_.find(name);
    return it == functions_.end() ? nullptr : it->second;
  }

 private:
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const functional_apply_t>> functions_;
};

/// Serializes captures: the PyCompilerInterface slot is process-wide.
std::mutex& capture_mutex() {
  static std::mutex mutex;
  return mutex;
}

bool should_execute(const GraphTask& task, Node* fn) {
  if (task.exec_info_.empty())
    return true;
  auto it = task.exec_info_.find(fn);
  return it != task.exec_info_.end() && it->second.should_execute();
}

bool is_needed(const GraphTask& task, Node* fn) {
  if (task.exec_info_.empty())
    return true;
  auto it = task.exec_info_.find(fn);
  return it != task.exec_info_.end() && it->second.needed_;
}

const std::vector<GraphTask::ExecInfo::Capture>* captures_of(const GraphTask& task, Node* fn) {
  if (task.exec_info_.empty())
    return nullptr;
  auto it = task.exec_info_.find(fn);
  return it == task.exec_info_.end() ? nullptr : it->second.captures_.get();
}

/// The nodes of one backward that run or capture.
struct graph_nodes {
  std::vector<std::shared_ptr<Node>> nodes;  ///< root first, then discovery order
  std::unordered_map<Node*, uint32_t> index;
};

/// Walks depth first from the root, edges in order, so that two graphs of the
/// same structure list corresponding nodes at the same indices, and lifting
/// in this order gives corresponding lifted positions.
graph_nodes discover(const std::shared_ptr<Node>& root, const GraphTask& task) {
  graph_nodes g;
  g.nodes.push_back(root);
  g.index.emplace(root.get(), 0);
  std::vector<Node*> stack{root.get()};
  while (!stack.empty()) {
    Node* fn = stack.back();
    stack.pop_back();
    for (const auto& edge : fn->next_edges()) {
      Node* next = edge.function.get();
      if (!next || !should_execute(task, next))
        continue;
      if (g.index.emplace(next, static_cast<uint32_t>(g.nodes.size())).second) {
        g.nodes.push_back(edge.function);
        stack.push_back(next);
      }
    }
  }
  return g;
}

/// Refuses what functional capture leaves to the stock engine.
void check_scope(const graph_nodes& g, const GraphTask& task) {
  if (at::GradMode::is_enabled())
    fail("create_graph=True is not captured");
  if (torch::autograd::AnomalyMode::is_enabled())
    fail("anomaly mode is on");
  for (const auto& node : g.nodes) {
    Node& fn = *node;
    if (!fn.tensor_pre_hooks().empty() || !fn.retains_grad_hooks().empty() ||
        !fn.pre_hooks().empty() || !fn.post_hooks().empty() || fn.tensor_post_acc_grad_hooks())
      fail("node " + fn.name() + " has hooks");
    if (auto* captures = captures_of(task, &fn))
      for (const auto& capture : *captures)
        if (!capture.DO_NOT_USE_DEPRECATED_get_capture_hooks().empty())
          fail("node " + fn.name() + " has capture hooks");
  }
}

/// Lifts every node's state into `call`, in the order of `g`, as the compiled
/// autograd driver does (the node call, whether it runs, its own state, its
/// edges), and returns each node's name and specialization key.
std::vector<std::string> lift(ca::AutogradCompilerCall& call, const graph_nodes& g,
                              const GraphTask& task) {
  std::vector<std::string> keys;
  keys.reserve(g.nodes.size());
  for (const auto& node : g.nodes) {
    ca::NodeCall& node_call = call.node_calls.lookup(node);
    if (auto* captures = captures_of(task, node.get()))
      for (const auto& capture : *captures)
        node_call.mark_output(capture.input_idx_, capture.output_idx_);
    ca::CompiledNodeArgs args(call, node_call);
    try {
      args.collect(node_call);
      if (args.cond(is_needed(task, node.get()))) {
        node->compiled_args(args);
        args.collect(node->next_edges());
      }
    } catch (const std::exception& e) {
      fail("node " + node->name() + " cannot be lifted: " + message_of(e));
    }
    auto key = args.key();
    std::string entry = node->name();
    entry.push_back('\0');
    entry.append(reinterpret_cast<const char*>(key.key), key.key_size);
    keys.push_back(std::move(entry));
  }
  // Hooks and unpack hooks arrive as Python objects, which only Python runs.
  if (!call.hooks.empty() || !call.sv_to_hooks.empty() || !call.pynode_objs.empty() ||
      !call.packed_inputs.empty() || !call.cpp_tensor_pre_hooks.empty())
    fail("the graph holds hooks or Python objects");
  return keys;
}

/// The IR's description of node `i` of `g`; input metadata is left to
/// structural capture, which owns that format.
compiler::node_info describe(const graph_nodes& g, uint32_t i, const GraphTask& task) {
  Node& fn = *g.nodes[i];
  compiler::node_info info;
  info.type_name = c10::demangle(typeid(fn).name());
  info.sequence_nr = fn.sequence_nr();
  info.is_root = i == 0;
  info.is_accumulate_grad = dynamic_cast<torch::autograd::AccumulateGrad*>(&fn) != nullptr;
  info.needed = is_needed(task, &fn);
  for (const auto& edge : fn.next_edges()) {
    compiler::edge_ref ref;
    if (auto it = g.index.find(edge.function.get()); it != g.index.end()) {
      ref.target = it->second;
      ref.input_nr = edge.input_nr;
    }
    info.edges.push_back(ref);
  }
  if (auto* captures = captures_of(task, &fn))
    for (const auto& capture : *captures)
      info.captures.push_back({static_cast<uint32_t>(capture.input_idx_),
                               static_cast<uint32_t>(capture.output_idx_)});
  return info;
}

/// Returns `iv` with each tensor in it replaced, depth first, by
/// `replace(tensor)`: the one walk that both records packed arguments and
/// rebuilds them.
template <class Replace>
c10::IValue map_tensors(const c10::IValue& iv, Replace& replace) {
  if (iv.isTensor())
    return replace(iv.toTensor());
  if (iv.isTensorList()) {
    c10::List<at::Tensor> out;
    for (at::Tensor t : iv.toTensorList())
      out.push_back(replace(t));
    return out;
  }
  if (iv.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> out;
    for (std::optional<at::Tensor> t : iv.toOptionalTensorList())
      out.push_back(t ? std::optional<at::Tensor>(replace(*t)) : std::nullopt);
    return out;
  }
  if (iv.isList()) {
    auto list = iv.toList();
    c10::impl::GenericList out(list.elementType());
    for (size_t k = 0; k < list.size(); ++k)
      out.push_back(map_tensors(list.get(k), replace));
    return out;
  }
  if (iv.isTuple()) {
    std::vector<c10::IValue> out;
    for (const c10::IValue& element : iv.toTupleRef().elements())
      out.push_back(map_tensors(element, replace));
    return c10::ivalue::Tuple::create(std::move(out));
  }
  if (iv.isGenericDict()) {
    auto dict = iv.toGenericDict();
    c10::impl::GenericDict out(dict.keyType(), dict.valueType());
    for (const auto& entry : dict)
      out.insert(entry.key(), map_tensors(entry.value(), replace));
    return out;
  }
  return iv;
}

/// The stock engine's AccumulateGrad::apply on `variable`, given a gradient
/// this function may steal (as the stock engine does when nothing else holds
/// it).
void accumulate_into_grad(const at::Tensor& variable, at::Tensor&& grad) {
  at::Tensor& slot = variable.mutable_grad();
  torch::autograd::AccumulateGrad::accumulateGrad(
      variable, slot, grad, /*num_expected_refs=*/1,
      [&slot](at::Tensor&& update) { slot = std::move(update); });
}

/// CopySlices before its inner function: the gradient copied into a tensor
/// shaped like the base, the slice of it the view covers, and a contiguous
/// clone of that slice for the inner function.
variable_list copy_slices_prologue(const at::Tensor& grad, const at::TensorGeometry& base,
                                   const at::TensorGeometry& view) {
  auto result = grad.new_empty_strided_symint(base.sym_sizes(), base.sym_strides());
  result.copy_(grad);
  auto offset = view.sym_storage_offset() - base.sym_storage_offset();
  auto slice = result.as_strided_symint(view.sym_sizes(), view.sym_strides(), offset);
  auto slice_clone = slice.clone(at::MemoryFormat::Contiguous);
  return {std::move(result), std::move(slice), std::move(slice_clone)};
}

/// CopySlices after its inner function: the inner gradient for the view is
/// written into the base-shaped result, the others pass through.
variable_list copy_slices_epilogue(const std::vector<bool>& needs_input_grad,
                                   const at::Tensor& result, const variable_list& inner,
                                   const at::Tensor& slice) {
  variable_list grads(needs_input_grad.size());
  for (size_t i = 0; i < inner.size() && i < grads.size(); ++i) {
    if (!needs_input_grad[i] || !inner[i].defined())
      continue;
    if (i == 0) {
      slice.copy_(inner[0]);
      grads[0] = result;
    } else {
      grads[i] = inner[i];
    }
  }
  return grads;
}

/// The stock engine's output check, with its message.
void validate(Node& fn, variable_list& grads) {
  torch::autograd::validate_outputs(fn.next_edges(), grads, [&](const std::string& msg) {
    std::ostringstream out;
    out << "Function " << fn.name() << " returned an " << msg;
    return out.str();
  });
}

/// Makes the node's stream wait for gradients that arrived on other streams,
/// as Engine::evaluate_function does.
void wait_for_ready_events(InputBuffer& inputs, const std::optional<c10::Stream>& stream) {
  for (size_t pos = 0; pos < inputs.ready_events.size(); ++pos) {
    if (!inputs.buffer[pos].defined() ||
        !at::accelerator::isAccelerator(inputs.buffer[pos].device().type()))
      continue;
    const auto& ready_stream = inputs.ready_streams[pos];
    const auto& ready_event = inputs.ready_events[pos];
    TORCH_INTERNAL_ASSERT(ready_stream && stream);
    if (*stream != *ready_stream) {
      TORCH_INTERNAL_ASSERT(ready_event);
      stream->wait(*ready_event);
    }
  }
}

/// One capture in progress: the recording being built and the table that
/// names the tensors in flight.
class capture_session {
 public:
  explicit capture_session(functional_recording& recording) : recording_(recording) {}

  /// The node whose call is running; ops it records belong to it.
  uint32_t current_node = no_node;
  /// The name of each node, for messages.
  std::vector<std::string> node_names;
  /// `.grad` updates (leaf, gradient), in execution order, applied once
  /// capture has succeeded.
  std::vector<std::pair<at::Tensor, at::Tensor>> deferred_accumulations;

  std::string node_name() const {
    return current_node < node_names.size() ? node_names[current_node] : "?";
  }

  /// Returns the value `t` stands for (`no_value` if undefined). A tensor no
  /// op defined came from outside the recorded functionals: replay could not
  /// reproduce it.
  value_id value_of(const at::Tensor& t, std::string_view role) const {
    if (!t.defined())
      return no_value;
    auto it = values_.find(t.unsafeGetTensorImpl());
    if (it == values_.end())
      fail(std::string(role) + " of node " + node_name() + " is no tensor gradd recorded");
    return it->second.first;
  }

  /// Defines a fresh value for `t`; `no_value` if undefined.
  value_id define(const at::Tensor& t) {
    if (!t.defined())
      return no_value;
    value_id v = recording_.ir.new_value();
    // A weak reference keeps the TensorImpl's address from being reused
    // while it is a key, without the strong reference that would change
    // AccumulateGrad's and InputBuffer's stealing decisions.
    values_.insert_or_assign(t.unsafeGetTensorImpl(),
                             std::make_pair(v, c10::weak_intrusive_ptr<c10::TensorImpl>(
                                                   t.getIntrusivePtr())));
    return v;
  }

  /// Appends `o` and its payload, as part of the current node unless `o` names one.
  void emit(compiler::op o, op_payload payload = {}) {
    if (o.node == no_node)
      o.node = current_node;
    recording_.ir.ops.push_back(std::move(o));
    recording_.payloads.push_back(std::move(payload));
  }

  /// Returns the lifted position of `t`; fails if it was not lifted.
  uint32_t lifted_position(const at::Tensor& t) const {
    auto it = lifted_.find(t.unsafeGetTensorImpl());
    if (it == lifted_.end())
      fail("a leaf of node " + node_name() + " was not lifted");
    return it->second;
  }

  /// Emits one graph_input per lifted tensor.
  void add_lifted(const std::vector<at::Tensor>& lifted) {
    for (uint32_t i = 0; i < lifted.size(); ++i) {
      lifted_.emplace(lifted[i].unsafeGetTensorImpl(), i);
      auto o = make_op(op_kind::graph_input, i);
      o.results.push_back(define(lifted[i]));
      emit(std::move(o));
    }
  }

 private:
  functional_recording& recording_;
  std::unordered_map<const c10::TensorImpl*,
                     std::pair<value_id, c10::weak_intrusive_ptr<c10::TensorImpl>>>
      values_;
  std::unordered_map<const c10::TensorImpl*, uint32_t> lifted_;
};

/// gradd's PyCompilerInterface during a capture: runs what a node hands it
/// and records it.
class functional_recorder final : public ca::PyCompilerInterface {
 public:
  explicit functional_recorder(capture_session& session) : session_(session) {}

  std::string bind_function(PyObject*, const std::string& fn_name, functional_apply_t fn,
                            std::vector<at::TypePtr>, bool, bool) const override {
    functional_registry::instance().bind(fn_name, std::move(fn));
    return fn_name;
  }

  variable_list call_function(PyObject*, const char* method_name, const std::string& fn_name,
                              const variable_list& inputs, const ca::ivalue_list& packed_args,
                              const c10::IValue&) const override {
    if (std::string_view(method_name) != "apply_functional")
      fail(std::string("node ") + session_.node_name() + " called " + method_name);
    auto fn = functional_registry::instance().find(fn_name);
    if (!fn)
      fail("functional " + fn_name + " was bound before gradd's registry saw it");

    auto o = make_op(op_kind::apply_functional, static_cast<int64_t>(inputs.size()));
    o.target = fn_name;
    for (const auto& grad : inputs)
      o.args.push_back(session_.value_of(grad, "a gradient"));
    op_payload payload;
    payload.fn = fn;
    for (const auto& arg : packed_args) {
      packed_argument packed;
      bool holds_tensor = false;
      auto strip = [&](const at::Tensor& t) {
        value_id v = session_.value_of(t, "a packed tensor");
        packed.tensors.push_back(v);
        holds_tensor = holds_tensor || v != no_value;
        return at::Tensor();
      };
      // The recording keeps the argument's shape, not the captured tensors:
      // they belong to this iteration.
      packed.value = map_tensors(arg, strip);
      if (holds_tensor) {
        for (value_id v : packed.tensors)
          if (v != no_value)
            o.args.push_back(v);
      } else {
        packed.value = arg;
        packed.tensors.clear();
      }
      payload.packed.push_back(std::move(packed));
    }

    auto outputs = (*fn)(inputs, packed_args);
    for (const auto& out : outputs)
      o.results.push_back(session_.define(out));
    session_.emit(std::move(o), std::move(payload));
    return outputs;
  }

  variable_list call_copy_slices_prologue(PyObject*, const variable_list& inputs,
                                          const at::TensorGeometry& base,
                                          const at::TensorGeometry& view) const override {
    auto o = make_op(op_kind::copy_slices_prologue);
    o.args.push_back(session_.value_of(inputs.at(0), "the gradient"));
    auto outputs = copy_slices_prologue(inputs[0], base, view);
    for (const auto& out : outputs)
      o.results.push_back(session_.define(out));
    op_payload payload;
    payload.base = base;
    payload.view = view;
    session_.emit(std::move(o), std::move(payload));
    return outputs;
  }

  variable_list call_copy_slices_epilogue(PyObject*, const std::vector<bool>& needs_input_grad,
                                          const at::Tensor& result, const variable_list& res,
                                          const at::Tensor& grad_slice) const override {
    auto o = make_op(op_kind::copy_slices_epilogue);
    o.args.push_back(session_.value_of(result, "the base gradient"));
    o.args.push_back(session_.value_of(grad_slice, "the slice gradient"));
    for (const auto& grad : res)
      o.args.push_back(session_.value_of(grad, "an inner gradient"));
    auto outputs = copy_slices_epilogue(needs_input_grad, result, res, grad_slice);
    for (const auto& out : outputs)
      o.results.push_back(session_.define(out));
    op_payload payload;
    payload.needs_input_grad = needs_input_grad;
    session_.emit(std::move(o), std::move(payload));
    return outputs;
  }

  at::Tensor call_unpack(PyObject*, std::optional<size_t>, size_t) const override {
    // lift() refuses graphs with unpack hooks, which are Python objects.
    fail("node " + session_.node_name() + " unpacks through a saved-tensor hook");
  }

  void call_accumulate_grad(PyObject*, const at::Tensor& variable, const at::Tensor& grad,
                            bool) const override {
    auto o = make_op(op_kind::accumulate_grad, session_.lifted_position(variable));
    o.args.push_back(session_.value_of(grad, "the gradient"));
    session_.emit(std::move(o));
    session_.deferred_accumulations.emplace_back(variable, grad);
  }

 private:
  capture_session& session_;
};

/// A node the simulated ready queue holds. The stock engine's queue orders
/// tasks by sequence_nr alone within one backward, highest first; with the
/// same comparison and the same pushes, ties break the same way.
struct ready_node {
  uint64_t sequence_nr;
  uint32_t node;
};

struct lower_sequence_nr {
  bool operator()(const ready_node& a, const ready_node& b) const noexcept {
    return a.sequence_nr < b.sequence_nr;
  }
};

/// Runs the nodes of `g` in the stock engine's order under the recorder.
class stock_order_run {
 public:
  stock_order_run(const graph_nodes& g, const GraphTask& task, ca::AutogradCompilerCall& call,
                  ca::TraceState& state, capture_session& session, functional_recording& rec)
      : g_(g), task_(task), call_(call), state_(state), session_(session), rec_(rec),
        dependencies_(g.nodes.size(), 0), buffers_(g.nodes.size()),
        buffer_values_(g.nodes.size()), captured_(task.captured_vars_.size()),
        captured_values_(task.captured_vars_.size(), no_value) {
    for (const auto& [node, count] : task.dependencies_)
      if (auto it = g.index.find(node); it != g.index.end())
        dependencies_[it->second] = count;
  }

  void run() {
    std::priority_queue<ready_node, std::vector<ready_node>, lower_sequence_nr> ready;
    buffers_[0].emplace(variable_list());
    ready.push({g_.nodes[0]->sequence_nr(), 0});
    while (!ready.empty()) {
      uint32_t i = ready.top().node;
      ready.pop();
      evaluate(i, ready);
    }
  }

  std::vector<uint32_t> executed;
  variable_list& captured() { return captured_; }
  const std::vector<value_id>& captured_values() const { return captured_values_; }

 private:
  using queue = std::priority_queue<ready_node, std::vector<ready_node>, lower_sequence_nr>;

  /// Engine::evaluate_function and call_function for node `i`.
  void evaluate(uint32_t i, queue& ready) {
    Node& fn = *g_.nodes[i];
    session_.current_node = i;
    InputBuffer inputs = std::move(*buffers_[i]);
    buffers_[i].reset();
    std::vector<value_id> input_values = std::move(buffer_values_[i]);
    auto stream = fn.stream();
    c10::OptionalStreamGuard stream_guard{stream};
    wait_for_ready_events(inputs, stream);

    if (auto* captures = captures_of(task_, &fn)) {
      for (const auto& capture : *captures) {
        captured_[capture.output_idx_] = inputs.buffer[capture.input_idx_];
        captured_values_[capture.output_idx_] = input_values[capture.input_idx_];
      }
      rec_.leaf_nodes.push_back(i);
    }
    if (!is_needed(task_, &fn))
      return;

    // No will_release_variables(): a node told so may free buffers its
    // backward consumes, and a capture that fails later must leave the graph
    // runnable by the stock engine. It only ever saves memory.
    variable_list grads = std::move(inputs.buffer);
    at::NoNamesGuard no_names;  // as Node::operator() runs every backward
    ca::SwapSavedVariables saved(call_, state_, nullptr, call_.node_calls.lookup(g_.nodes[i]));
    variable_list outputs;
    try {
      outputs = fn.apply_with_saved(grads, saved);
    } catch (const c10::NotImplementedError& e) {
      fail("node " + fn.name() + " cannot be captured: " + e.what_without_backtrace());
    }
    saved.debug_asserts();
    grads.clear();
    executed.push_back(i);

    std::vector<value_id> output_values;
    output_values.reserve(outputs.size());
    for (const auto& out : outputs)
      output_values.push_back(session_.value_of(out, "an output"));
    validate_and_record(fn, saved, outputs, output_values);

    if (outputs.empty()) {
      rec_.leaf_nodes.push_back(i);
      return;
    }
    for (size_t k = 0; k < outputs.size(); ++k) {
      const auto& next = fn.next_edge(k);
      if (!next.is_valid())
        continue;
      auto it = g_.index.find(next.function.get());
      if (it == g_.index.end())
        continue;  // does not execute: the stock engine never queues it either
      uint32_t target = it->second;
      bool is_ready = --dependencies_[target] == 0;
      route(target, next, std::move(outputs[k]), output_values[k], stream);
      if (is_ready)
        ready.push({next.function->sequence_nr(), target});
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
    validate(fn, outputs);
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
    for (size_t k = 0; k < outputs.size(); ++k)
      output_values[k] = session_.define(outputs[k]);
    o.results = output_values;
    session_.emit(std::move(o));
  }

  /// Adds a gradient to the input buffer of node `target` with the stock
  /// engine's own InputBuffer::add, recording a sum when one happens.
  void route(uint32_t target, const torch::autograd::Edge& next, at::Tensor&& grad,
             value_id value, const std::optional<c10::Stream>& producer_stream) {
    Node* next_fn = next.function.get();
    if (!buffers_[target]) {
      buffers_[target].emplace(next_fn->num_inputs());
      buffer_values_[target].assign(next_fn->num_inputs(), no_value);
    }
    InputBuffer& buffer = *buffers_[target];
    value_id& slot = buffer_values_[target][next.input_nr];
    bool had_gradient = buffer.buffer[next.input_nr].defined();
    buffer.add(next.input_nr, std::move(grad), producer_stream, next_fn->stream(), next_fn);
    if (value == no_value)
      return;
    if (!had_gradient) {
      slot = value;
      return;
    }
    auto o = make_op(op_kind::accumulate, -1, target);
    o.args = {slot, value};
    slot = session_.define(buffer.buffer[next.input_nr]);
    o.results.push_back(slot);
    session_.emit(std::move(o));
  }

  const graph_nodes& g_;
  const GraphTask& task_;
  ca::AutogradCompilerCall& call_;
  ca::TraceState& state_;
  capture_session& session_;
  functional_recording& rec_;
  std::vector<int> dependencies_;
  std::vector<std::optional<InputBuffer>> buffers_;
  std::vector<std::vector<value_id>> buffer_values_;
  variable_list captured_;
  std::vector<value_id> captured_values_;
};

/// Records each value's last reader, so replay can drop it right after.
std::vector<uint32_t> last_uses(const compiler::graph& ir) {
  std::vector<uint32_t> last(ir.num_values, 0);
  for (uint32_t i = 0; i < ir.ops.size(); ++i) {
    for (value_id v : ir.ops[i].results)
      if (v != no_value)
        last[v] = i;
    for (value_id v : ir.ops[i].args)
      if (v != no_value)
        last[v] = i;
  }
  return last;
}

bool same_scalar(const c10::IValue& a, const c10::IValue& b) {
  if (a.isInt() && b.isInt())
    return a.toInt() == b.toInt();
  if (a.isDouble() && b.isDouble())
    return a.toDouble() == b.toDouble();
  if (a.isSymInt() && b.isSymInt())
    return a.toSymInt() == b.toSymInt();
  return false;
}

/// Hands the streams of the backward's leaves to the caller's
/// post-processing, which syncs the caller's streams with them.
void record_leaf_streams(const functional_recording& rec, const graph_nodes& g,
                         const GraphTask& task) {
  // The hook receives the task const, but the stock engine records leaf
  // streams in it for exactly this post-processing.
  auto& leaf_streams = const_cast<GraphTask&>(task).leaf_streams;
  for (uint32_t i : rec.leaf_nodes)
    if (auto stream = g.nodes[i]->stream())
      leaf_streams.emplace(*stream);
}

} // namespace

functional_recording capture_functional(const std::shared_ptr<Node>& graph_root,
                                        const GraphTask& task, bool accumulate_grad,
                                        const torch::autograd::edge_list& outputs) {
  std::lock_guard lock(capture_mutex());
  // The stock engine runs nodes under the TLS the task captured, with grad
  // mode set to create_graph.
  at::ThreadLocalStateGuard tls(task.thread_locals_);
  auto g = discover(graph_root, task);
  check_scope(g, task);

  functional_recording rec;
  rec.ir.keep_graph = task.keep_graph_;
  rec.ir.accumulate_grad = accumulate_grad;
  rec.ir.exec_filter = !task.exec_info_.empty();
  rec.ir.num_outputs = static_cast<uint32_t>(task.captured_vars_.size());

  ca::AutogradCompilerCall call(ca::SizeInput::STATIC);
  rec.node_keys = lift(call, g, task);
  for (uint32_t i = 0; i < g.nodes.size(); ++i)
    rec.ir.nodes.push_back(describe(g, i, task));
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

  capture_session session(rec);
  for (const auto& node : g.nodes)
    session.node_names.push_back(node->name());
  session.add_lifted(call.tensor_args.inputs);

  // Static sizes: no node's sizes are swapped for symbolic ones.
  ca::TraceState state(std::vector<std::optional<c10::SymInt>>(call.all_size_inputs.size()),
                       outputs.size());
  stock_order_run run(g, task, call, state, session, rec);
  {
    ca::PyCompilerGuard guard(std::make_unique<functional_recorder>(session));
    run.run();
  }
  session.current_node = no_node;
  auto out = make_op(op_kind::output);
  out.args = run.captured_values();
  session.emit(std::move(out));
  rec.last_use = last_uses(rec.ir);
  rec.gradients = std::move(run.captured());

  // Capture succeeded: now what the stock engine would have left behind.
  for (auto& [variable, grad] : session.deferred_accumulations)
    accumulate_into_grad(variable, std::move(grad));
  session.deferred_accumulations.clear();
  if (!task.keep_graph_)
    for (uint32_t i : run.executed)
      g.nodes[i]->release_variables();
  record_leaf_streams(rec, g, task);
  return rec;
}

variable_list replay_functional(const functional_recording& rec,
                                const std::shared_ptr<Node>& graph_root, const GraphTask& task,
                                bool accumulate_grad, const torch::autograd::edge_list&) {
  at::ThreadLocalStateGuard tls(task.thread_locals_);
  at::NoNamesGuard no_names;
  auto g = discover(graph_root, task);
  check_scope(g, task);
  if (accumulate_grad != rec.ir.accumulate_grad)
    fail("replay: backward() and autograd::grad() do not share a recording");
  if (g.nodes.size() != rec.ir.nodes.size())
    fail("replay: the graph has " + std::to_string(g.nodes.size()) + " nodes, the recording " +
         std::to_string(rec.ir.nodes.size()));

  ca::AutogradCompilerCall call(ca::SizeInput::STATIC);
  auto keys = lift(call, g, task);
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i] != rec.node_keys[i])
      fail("replay: node " + std::to_string(i) + " (" + g.nodes[i]->name() +
           ") differs from the recorded one");
  if (call.tensor_args.inputs.size() != rec.num_lifted ||
      call.all_size_inputs.size() != rec.sizes.size() ||
      call.lifted_ivalue_args.args.size() != rec.scalars.size())
    fail("replay: the graph lifts different inputs");
  for (size_t i = 0; i < rec.sizes.size(); ++i)
    if (call.all_size_inputs[i].value != rec.sizes[i])
      fail("replay: a size changed (" + std::to_string(rec.sizes[i]) + " -> " +
           std::to_string(call.all_size_inputs[i].value) + ")");
  for (size_t i = 0; i < rec.scalars.size(); ++i)
    if (!same_scalar(*call.lifted_ivalue_args.args[i].actual_ptr, rec.scalars[i]))
      fail("replay: a lifted scalar changed");

  const std::vector<at::Tensor> lifted = std::move(call.tensor_args.inputs);
  const auto& ops = rec.ir.ops;
  std::vector<at::Tensor> values(rec.ir.num_values);
  variable_list results;
  for (uint32_t i = 0; i < ops.size(); ++i) {
    const auto& o = ops[i];
    const auto& payload = rec.payloads[i];
    Node* node = o.node != no_node ? g.nodes[o.node].get() : nullptr;
    auto stream = node ? node->stream() : std::nullopt;
    c10::OptionalStreamGuard stream_guard{stream};

    variable_list args;
    args.reserve(o.args.size());
    for (value_id v : o.args)
      args.push_back(v == no_value ? at::Tensor() : values[v]);
    std::vector<c10::IValue> packed;
    if (o.kind == op_kind::apply_functional) {
      for (const auto& arg : payload.packed) {
        if (arg.tensors.empty()) {
          packed.push_back(arg.value);
          continue;
        }
        size_t next = 0;
        auto fill = [&](const at::Tensor&) {
          value_id v = arg.tensors[next++];
          return v == no_value ? at::Tensor() : values[v];
        };
        packed.push_back(map_tensors(arg.value, fill));
      }
    }
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
        InputBuffer sum(1);
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
        validate(*node, args);
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
        fail(std::string("replay: unexpected op ") + compiler::to_string(o.kind));
    }
    if (outs.size() != o.results.size())
      fail(std::string("replay: ") + compiler::to_string(o.kind) + "[" + o.target +
           "] returned " + std::to_string(outs.size()) + " gradients, recorded " +
           std::to_string(o.results.size()));
    for (size_t k = 0; k < outs.size(); ++k) {
      value_id r = o.results[k];
      if (r != no_value && rec.last_use[r] != i)
        values[r] = std::move(outs[k]);
    }
  }

  if (!task.keep_graph_)
    for (uint32_t i = 0; i < g.nodes.size(); ++i)
      if (rec.ir.nodes[i].needed)
        g.nodes[i]->release_variables();
  record_leaf_streams(rec, g, task);
  return results;
}

std::shared_ptr<const functional_apply_t> bound_functional(const std::string& name) {
  return functional_registry::instance().find(name);
}

} // namespace gradd::engine::detail
