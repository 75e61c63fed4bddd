#pragma once

#include <torch/csrc/autograd/edge.h>
#include <torch/csrc/autograd/variable.h>

#include <memory>

namespace torch::autograd {
struct GraphTask;
struct Node;
}

namespace gradd::engine {

/// The function gradd installs with Engine::set_compiled_autograd: every
/// backward of the process lands here once Engine::execute has prepared its
/// GraphTask. Serves it with a plan, or with the stock engine.
torch::autograd::variable_list serve_backward(
    const std::shared_ptr<torch::autograd::Node>& graph_root,
    const torch::autograd::GraphTask& task, bool accumulate_grad,
    const std::vector<torch::autograd::Edge>& outputs);

} // namespace gradd::engine
