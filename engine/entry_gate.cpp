// The entry gate of Note [Concurrent backwards and libtorch's re-entrancy check].

#include "engine/entry_gate.hpp"

#include "engine/backward_hook.hpp"
#include "engine/early_bet.hpp"
#include "engine/shared_seed.hpp"
#include "gradd/gradd.hpp"
#include "gradd/interpreter.hpp"

#include <torch/csrc/autograd/engine.h>

#include <mutex>

namespace gradd::engine {

namespace {

using torch::autograd::Edge;
using torch::autograd::variable_list;

/// Recursive: a backward that falls back to the stock engine between the
/// check and the hook (gradd disabled meanwhile) keeps the gate, and a hook
/// inside it may start another backward on the same thread.
std::recursive_mutex gate;
thread_local int gate_depth = 0;  ///< times this thread holds the gate

class gated_engine final : public torch::autograd::Engine {
public:
  variable_list execute(const std::vector<Edge>& roots, const variable_list& inputs,
                        bool keep_graph, bool create_graph, bool accumulate_grad,
                        const std::vector<Edge>& outputs) override {
    // Without gradd's hook the stock engine runs the whole backward in
    // here: no window to guard, and holding the gate would serialize
    // backwards (and deadlock a device thread's hook that starts one). No
    // graph serves it either: it starts from a seed of its own (Note [A
    // seed made once]).
    if (!gradd::is_enabled()) {
      if (holds_shared_seed(inputs))
        return Engine::execute(roots, own_seeds(inputs), keep_graph, create_graph,
                               accumulate_grad, outputs);
      return Engine::execute(roots, inputs, keep_graph, create_graph, accumulate_grad, outputs);
    }
    early_bet_scope bet(roots, inputs, keep_graph, create_graph, accumulate_grad, outputs);
    if (auto served = bet.serve(roots, inputs, keep_graph, accumulate_grad, outputs))
      return std::move(*served);
    struct leave {
      int depth;
      ~leave() { leave_entry_gate(depth); }
    } on_exit{enter_entry_gate()};
    return Engine::execute(roots, inputs, keep_graph, create_graph, accumulate_grad, outputs);
  }
};

torch::autograd::Engine& gated_engine_instance() {
  // Never destroyed: engine threads may outlive static destruction.
  static auto* engine = new gated_engine;
  return *engine;
}

// Installed when the library loads: an engine only gets device threads
// (CUDA) if it is the first to start them, so it must be the default before
// the first backward.
const bool installed_at_load = (install_entry_gate(), true);

} // namespace

void install_entry_gate() {
  static bool installed = [] {
    auto& current = torch::autograd::Engine::get_default_engine();
    if (&current != &torch::autograd::Engine::get_base_engine())
      return false;
    torch::autograd::set_default_engine_stub(&gated_engine_instance);
    install_shared_seed();
    return true;
  }();
  (void)installed;
}

void switch_hook(bool on) {
  std::lock_guard hold(gate);
  torch::autograd::Engine::set_compiled_autograd(on ? &serve_backward : nullptr);
}

int enter_entry_gate() {
  gate.lock();
  return gate_depth++;
}

void leave_entry_gate(int depth) noexcept {
  if (gate_depth > depth) {  // the hook did not pass the gate (error, or no hook)
    --gate_depth;
    gate.unlock();
  }
}

void pass_entry_gate() noexcept {
  if (gate_depth > 0) {
    --gate_depth;
    gate.unlock();
  }
}

} // namespace gradd::engine

namespace gradd {

int enter_backward_gate() {
  return engine::enter_entry_gate();
}

void leave_backward_gate(int depth) noexcept {
  engine::leave_entry_gate(depth);
}

} // namespace gradd
