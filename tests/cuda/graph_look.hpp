#pragma once

// A backward's graph, walked and tabled as gradd's hook reads it, handed to
// a test in place of any engine: for the cases of what cuda/ reads of one
// before its lift (lifts alone, the shape probe). Reading is the same on
// every device, so these run on CPU tensors.

#include "cuda/lift_alone.hpp"
#include "functional/functional_hooks.hpp"
#include "functional/graph.hpp"

#include <torch/torch.h>

#include <functional>

namespace gradd::test {

/// Runs `backward` with the compiled-autograd hook calling `look` on its
/// graph (walk and node table): nothing here needs the gradients.
inline void look_at_graph(const std::function<void()>& backward,
                          const std::function<void(const cuda::backward_nodes&)>& look) {
  static std::function<void(const cuda::backward_nodes&)> current;
  current = look;
  hook_scope hooks([](const std::shared_ptr<torch::autograd::Node>& root,
                      const torch::autograd::GraphTask& task, bool accumulate_grad,
                      const torch::autograd::edge_list& outputs) {
    at::NoGradGuard no_grad;  // as gradd's hook reads a graph
    auto g = functional::read_graph(root, task, accumulate_grad, outputs);
    current(cuda::backward_nodes{g.walk.nodes, g.ir});
    return torch::autograd::variable_list(outputs.size());
  });
  backward();
}

} // namespace gradd::test
