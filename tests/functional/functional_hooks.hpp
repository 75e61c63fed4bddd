#pragma once

// Compiled-autograd hooks that route a backward through functional capture
// or replay alone, without the rest of gradd: for tests of the functional
// path (the one CUDA graphs are captured from) against the stock engine.

#include "functional/capture.hpp"
#include "functional/replay.hpp"

#include <torch/csrc/autograd/engine.h>

#include <optional>

namespace gradd::test {

/// The recording capture_hook wrote last and replay_hook replays.
inline std::optional<functional::recording>& last_recording() {
  static std::optional<functional::recording> recording;
  return recording;
}

/// Captures the backward into last_recording() and returns its gradients.
inline torch::autograd::variable_list capture_hook(
    const std::shared_ptr<torch::autograd::Node>& root, const torch::autograd::GraphTask& task,
    bool accumulate_grad, const torch::autograd::edge_list& outputs) {
  last_recording() = functional::capture(root, task, accumulate_grad, outputs);
  return last_recording()->gradients;
}

/// Replays last_recording() on this backward's graph.
inline torch::autograd::variable_list replay_hook(
    const std::shared_ptr<torch::autograd::Node>& root, const torch::autograd::GraphTask& task,
    bool accumulate_grad, const torch::autograd::edge_list& outputs) {
  return functional::replay(*last_recording(), root, task, accumulate_grad, outputs);
}

/// Routes every backward of its scope through `fn` instead of the stock engine.
class hook_scope {
public:
  explicit hook_scope(torch::autograd::Engine::compiled_autograd_fn fn) {
    torch::autograd::Engine::set_compiled_autograd(fn);
  }
  ~hook_scope() { torch::autograd::Engine::set_compiled_autograd(nullptr); }
  hook_scope(const hook_scope&) = delete;
  hook_scope& operator=(const hook_scope&) = delete;
};

} // namespace gradd::test
