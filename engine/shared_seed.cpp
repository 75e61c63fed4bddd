// Variable hooks that hand backward() a seed made once (see shared_seed.hpp).

#include "engine/shared_seed.hpp"

#include "cuda/graph_path.hpp"
#include "gradd/gradd.hpp"

#include <ATen/core/VariableHooksInterface.h>
#include <ATen/ops/ones_like.h>
#include <torch/csrc/autograd/functions/basic_ops.h>

#include <utility>

namespace gradd::engine {

namespace {

/// The shared seed of the backward() under way on this thread, if it has one.
thread_local const c10::TensorImpl* seed_in_flight = nullptr;

/// Whether libtorch would start a backward of `self` from ones it makes
/// itself, with nothing it checks or raises about them: gradd takes only
/// the plain `loss.backward()` of a CUDA scalar.
bool starts_from_ones(const at::Tensor& self, at::TensorList inputs,
                      const std::optional<at::Tensor>& gradient, bool create_graph) {
  return (!gradient || !gradient->defined()) && inputs.empty() && !create_graph
         && self.dim() == 0 && self.is_cuda() && at::isFloatingType(self.scalar_type())
         && self.requires_grad() && self.grad_fn() && gradd::is_enabled();
}

/// libtorch's variable hooks, but for backward(): forwards every call to
/// the hooks it wraps.
class seeding_hooks final : public at::impl::VariableHooksInterface {
public:
  explicit seeding_hooks(const at::impl::VariableHooksInterface* inner) : inner_(inner) {}

  void _backward(const at::Tensor& self, at::TensorList inputs,
                 const std::optional<at::Tensor>& gradient, std::optional<bool> keep_graph,
                 bool create_graph) const override {
    at::Tensor seed;
    if (starts_from_ones(self, inputs, gradient, create_graph))
      seed = cuda::shared_seed(self);
    if (!seed.defined())
      return inner_->_backward(self, inputs, gradient, keep_graph, create_graph);
    struct in_flight {
      const c10::TensorImpl* outer;
      ~in_flight() { seed_in_flight = outer; }
    } scope{std::exchange(seed_in_flight, seed.unsafeGetTensorImpl())};
    inner_->_backward(self, inputs, seed, keep_graph, create_graph);
  }

  at::TensorBase tensor_data(const at::TensorBase& t) const override {
    return inner_->tensor_data(t);
  }
  at::TensorBase variable_data(const at::TensorBase& t) const override {
    return inner_->variable_data(t);
  }
  const std::shared_ptr<torch::autograd::Node>& grad_fn(const at::TensorBase& t) const override {
    return inner_->grad_fn(t);
  }
  unsigned _register_hook(const at::TensorBase& t,
                          std::function<at::TensorBase(const at::TensorBase&)> hook) const override {
    return inner_->_register_hook(t, std::move(hook));
  }
  void remove_hook(const at::TensorBase& t, unsigned pos) const override {
    inner_->remove_hook(t, pos);
  }
  bool is_view(const at::TensorBase& t) const override { return inner_->is_view(t); }
  const at::TensorBase& base(const at::TensorBase& t) const override { return inner_->base(t); }
  const std::string& name(const at::TensorBase& t) const override { return inner_->name(t); }
  bool is_leaf(const at::TensorBase& t) const override { return inner_->is_leaf(t); }
  int64_t output_nr(const at::TensorBase& t) const override { return inner_->output_nr(t); }
  void set_data(const at::TensorBase& t, const at::TensorBase& data) const override {
    inner_->set_data(t, data);
  }
  at::TensorBase data(const at::TensorBase& t) const override { return inner_->data(t); }
  int64_t _version(const at::TensorBase& t) const override { return inner_->_version(t); }
  void retain_grad(const at::TensorBase& t) const override { inner_->retain_grad(t); }
  bool retains_grad(const at::TensorBase& t) const override { return inner_->retains_grad(t); }
  void requires_grad_(const at::TensorBase& t, bool on) const override {
    inner_->requires_grad_(t, on);
  }
  void basic_autograd_not_implemented_fallback(const c10::OperatorHandle& op,
                                               c10::DispatchKeySet keys,
                                               torch::jit::Stack* stack) const override {
    inner_->basic_autograd_not_implemented_fallback(op, keys, stack);
  }
  std::optional<c10::ScalarType> grad_dtype(const at::TensorBase& t) const override {
    return inner_->grad_dtype(t);
  }
  void set_grad_dtype(const at::TensorBase& t,
                      const std::optional<c10::ScalarType>& dtype) const override {
    inner_->set_grad_dtype(t, dtype);
  }

private:
  const at::impl::VariableHooksInterface* inner_;
};

} // namespace

void install_shared_seed() {
  // Never destroyed, like the engine: tensors use the hooks until the end.
  static auto* hooks = new seeding_hooks(at::impl::GetVariableHooks());
  at::impl::SetVariableHooks(hooks);
}

bool holds_shared_seed(const torch::autograd::variable_list& inputs) noexcept {
  if (!seed_in_flight)
    return false;
  for (const auto& t : inputs)
    if (t.unsafeGetTensorImpl() == seed_in_flight)
      return true;
  return false;
}

torch::autograd::variable_list own_seeds(const torch::autograd::variable_list& inputs) {
  auto own = inputs;
  for (auto& t : own)
    if (t.unsafeGetTensorImpl() == seed_in_flight)
      t = at::ones_like(t, LEGACY_CONTIGUOUS_MEMORY_FORMAT);
  return own;
}

own_seeds_scope::own_seeds_scope(torch::autograd::Node& root) {
  if (!seed_in_flight)  // most backwards: a plan's hit pays no dynamic_cast
    return;
  auto* graph_root = dynamic_cast<torch::autograd::GraphRoot*>(&root);
  if (!graph_root || !holds_shared_seed(graph_root->outputs))
    return;
  root_ = graph_root;
  shared_ = std::exchange(root_->outputs, own_seeds(root_->outputs));
}

own_seeds_scope::~own_seeds_scope() {
  if (root_)
    root_->outputs = std::move(shared_);
}

} // namespace gradd::engine
