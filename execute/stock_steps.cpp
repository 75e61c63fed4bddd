// The stock engine's steps around a node call (see stock_steps.hpp).
//
// The wait restates the loop in Engine::evaluate_function: every defined
// accelerator gradient has a ready stream, and one that differs from the
// node's stream has a ready event to wait on. The output check calls
// libtorch's validate_outputs with call_function's message, and the call
// restates call_function around it.

#include "execute/stock_steps.hpp"

#include "execute/current_node.hpp"

#include <ATen/DeviceAccelerator.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/input_buffer.h>

#include <sstream>

namespace gradd::execute {

namespace {

using torch::autograd::Node;
using torch::autograd::variable_list;

variable_list call_pre_hooks(Node& fn, variable_list inputs) {
  for (const auto& hook : fn.pre_hooks())
    inputs = (*hook)(inputs);
  return inputs;
}

variable_list call_post_hooks(Node& fn, variable_list outputs, const variable_list& inputs,
                              bool had_post_hooks) {
  const variable_list none;
  for (const auto& hook : fn.post_hooks())
    outputs = (*hook)(outputs, had_post_hooks ? inputs : none);
  return outputs;
}

} // namespace

void wait_for_ready_events(const torch::autograd::InputBuffer& inputs,
                           const std::optional<c10::Stream>& stream) {
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

void validate_node_outputs(torch::autograd::Node& fn, torch::autograd::variable_list& grads) {
  torch::autograd::validate_outputs(fn.next_edges(), grads, [&](const std::string& msg) {
    std::ostringstream out;
    out << "Function " << fn.name() << " returned an " << msg;
    return out.str();
  });
}

variable_list call_tensor_pre_hooks(Node& fn, variable_list inputs) {
  for (const auto& hook : fn.tensor_pre_hooks())
    inputs = (*hook)(inputs);
  for (const auto& [index, hook] : fn.retains_grad_hooks())
    inputs = (*hook)(inputs);
  return inputs;
}

variable_list call_function(Node& fn, variable_list inputs, bool keep_graph) {
  inputs = call_tensor_pre_hooks(fn, std::move(inputs));
  inputs = call_pre_hooks(fn, std::move(inputs));
  if (!keep_graph)
    fn.will_release_variables();
  bool has_post_hooks = !fn.post_hooks().empty();
  variable_list outputs;
  if (has_post_hooks) {
    // AccumulateGrad may steal a gradient whose use count is 1 + has_post_hooks;
    // keeping this copy is what that rule expects (see engine.cpp).
    auto inputs_copy = inputs;
    outputs = fn(std::move(inputs_copy));
  } else {
    outputs = fn(std::move(inputs));
  }
  validate_node_outputs(fn, outputs);
  if (fn.post_hooks().empty())
    return outputs;
  return call_post_hooks(fn, std::move(outputs), inputs, has_post_hooks);
}

variable_list evaluate_alone(Node& fn, variable_list inputs, bool keep_graph) {
  current_node_scope current;
  current.enter(fn);
  RECORD_FUNCTION(c10::str("autograd::engine::evaluate_function: ", fn.name()),
                  c10::ArrayRef<const c10::IValue>());
  return call_function(fn, std::move(inputs), keep_graph);
}

} // namespace gradd::execute
