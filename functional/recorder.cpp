// Recording a backward's functional calls as they run (see recorder.hpp).
//
// Each recorder call does the stock work first (the functional itself, or
// the step from steps.hpp) and then appends its op, naming its arguments
// through the session and defining a value for each result. `.grad`
// updates are only recorded and deferred: until capture has succeeded it
// leaves nothing behind that the stock engine would see.

#include "functional/recorder.hpp"

#include "functional/registry.hpp"
#include "functional/steps.hpp"

#include <torch/csrc/dynamo/compiled_autograd.h>

namespace gradd::functional {

using compiler::no_value;
using compiler::op_kind;
using compiler::value_id;
using torch::autograd::variable_list;

compiler::op make_op(op_kind kind, int64_t index, uint32_t node) {
  compiler::op o;
  o.kind = kind;
  o.index = index;
  o.node = node;
  return o;
}

std::string capture_session::node_name() const {
  return current_node < graph_.ir.nodes.size() ? graph_.node(current_node).name() : "?";
}

value_id capture_session::value_of(const at::Tensor& t, std::string_view role) const {
  if (!t.defined())
    return no_value;
  auto it = values_.find(t.unsafeGetTensorImpl());
  if (it == values_.end())
    throw_capture_error(std::string(role) + " of node " + node_name() +
                        " is no tensor gradd recorded");
  return it->second.first;
}

value_id capture_session::define(const at::Tensor& t) {
  if (!t.defined())
    return no_value;
  value_id v = recording_.ir.new_value();
  // A weak reference keeps the TensorImpl's address from being reused while
  // it is a key, without the strong reference that would change
  // AccumulateGrad's and InputBuffer's stealing decisions. A tensor defined
  // again (an add's backward hands one gradient to both inputs, an in-place
  // sum returns its first term) is named by its newest value from then on,
  // so the uses of one tensor are uses of one value, which passes keep in
  // order (compiler/passes/hook_moves.hpp).
  values_.insert_or_assign(
      t.unsafeGetTensorImpl(),
      std::make_pair(v, c10::weak_intrusive_ptr<c10::TensorImpl>(t.getIntrusivePtr())));
  return v;
}

std::vector<value_id> capture_session::define_all(const variable_list& tensors) {
  std::vector<value_id> values;
  values.reserve(tensors.size());
  for (const auto& t : tensors)
    values.push_back(define(t));
  return values;
}

void capture_session::emit(compiler::op o, op_payload payload) {
  if (o.node == compiler::no_node)
    o.node = current_node;
  recording_.ir.ops.push_back(std::move(o));
  recording_.payloads.push_back(std::move(payload));
}

uint32_t capture_session::lifted_position(const at::Tensor& t) const {
  auto it = lifted_.find(t.unsafeGetTensorImpl());
  if (it == lifted_.end())
    throw_capture_error("a leaf of node " + node_name() + " was not lifted");
  return it->second;
}

void capture_session::add_lifted(const std::vector<at::Tensor>& lifted) {
  for (uint32_t i = 0; i < lifted.size(); ++i) {
    lifted_.emplace(lifted[i].unsafeGetTensorImpl(), i);
    auto o = make_op(op_kind::graph_input, i);
    const auto& t = lifted[i];
    o.meta = {t.sizes().vec(), std::string(t.dtype().name()), t.device().str(), true};
    o.results.push_back(define(t));
    emit(std::move(o));
  }
}

namespace {

namespace ca = torch::dynamo::autograd;

class recorder final : public ca::PyCompilerInterface {
 public:
  explicit recorder(capture_session& session) : session_(session) {}

  std::string bind_function(PyObject*, const std::string& fn_name,
                            torch::autograd::functional_apply_t fn, std::vector<at::TypePtr>,
                            bool is_custom_function, bool) const override {
    bind_functional(fn_name, std::move(fn), is_custom_function);
    return fn_name;
  }

  variable_list call_function(PyObject*, const char* method_name, const std::string& fn_name,
                              const variable_list& inputs, const ca::ivalue_list& packed_args,
                              const c10::IValue&) const override {
    if (std::string_view(method_name) != "apply_functional")
      throw_capture_error("node " + session_.node_name() + " called " + method_name);
    auto binding = bound_functional(fn_name);
    if (!binding.fn)
      throw_capture_error("functional " + fn_name + " was bound before gradd's registry saw it");

    auto o = make_op(op_kind::apply_functional, static_cast<int64_t>(inputs.size()));
    o.target = fn_name;
    o.custom_function = binding.custom_function;
    for (const auto& grad : inputs)
      o.args.push_back(session_.value_of(grad, "a gradient"));
    op_payload payload;
    payload.fn = binding.fn;
    auto value_of_packed = [this](const at::Tensor& t) {
      return session_.value_of(t, "a packed tensor");
    };
    for (const auto& arg : packed_args) {
      auto packed = packed_argument::record(arg, value_of_packed);
      for (value_id v : packed.tensors)
        if (v != no_value)
          o.args.push_back(v);
      payload.packed.push_back(std::move(packed));
    }

    auto outputs = (*binding.fn)(inputs, packed_args);
    o.results = session_.define_all(outputs);
    session_.emit(std::move(o), std::move(payload));
    return outputs;
  }

  variable_list call_copy_slices_prologue(PyObject*, const variable_list& inputs,
                                          const at::TensorGeometry& base,
                                          const at::TensorGeometry& view) const override {
    auto o = make_op(op_kind::copy_slices_prologue);
    o.args.push_back(session_.value_of(inputs.at(0), "the gradient"));
    auto outputs = copy_slices_prologue(inputs[0], base, view);
    o.results = session_.define_all(outputs);
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
    o.results = session_.define_all(outputs);
    op_payload payload;
    payload.needs_input_grad = needs_input_grad;
    session_.emit(std::move(o), std::move(payload));
    return outputs;
  }

  at::Tensor call_unpack(PyObject*, std::optional<size_t>, size_t) const override {
    // lift_nodes() refuses graphs with unpack hooks, which are Python objects.
    throw_capture_error("node " + session_.node_name() + " unpacks through a saved-tensor hook");
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

} // namespace

std::unique_ptr<ca::PyCompilerInterface> make_recorder(capture_session& session) {
  return std::make_unique<recorder>(session);
}

} // namespace gradd::functional
