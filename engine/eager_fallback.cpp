// The stock engine as gradd's fallback: the GraphTask that Engine::execute
// prepared (dependencies, exec_info) is handed back to the engine itself.

#include "engine/eager_fallback.hpp"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/csrc/autograd/input_buffer.h>

namespace gradd::engine {

torch::autograd::variable_list run_on_stock_engine(
    const std::shared_ptr<torch::autograd::Node>& graph_root,
    const torch::autograd::GraphTask& task) {
  auto shared = const_cast<torch::autograd::GraphTask&>(task).shared_from_this();
  auto future = torch::autograd::Engine::get_default_engine().execute_with_graph_task(
      shared, graph_root, torch::autograd::InputBuffer(torch::autograd::variable_list()));
  future->wait();
  return future->value().toTensorVector();
}

} // namespace gradd::engine
