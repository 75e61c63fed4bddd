#pragma once

#include <torch/csrc/autograd/edge.h>
#include <torch/csrc/autograd/variable.h>

#include <memory>

namespace torch::autograd {
struct GraphTask;
struct Node;
}

namespace gradd::engine {

/// Runs the backward on the stock engine, on the same GraphTask the hook
/// received, and returns what Engine::execute would. Errors raised inside the
/// backward are rethrown as the stock engine rethrows them.
torch::autograd::variable_list run_on_stock_engine(
    const std::shared_ptr<torch::autograd::Node>& graph_root,
    const torch::autograd::GraphTask& task);

} // namespace gradd::engine
