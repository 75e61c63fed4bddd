// The stock engine's steps around a node call (see stock_steps.hpp).
//
// The wait restates the loop in Engine::evaluate_function: every defined
// accelerator gradient has a ready stream, and one that differs from the
// node's stream has a ready event to wait on. The output check calls
// libtorch's validate_outputs with call_function's message.

#include "engine/detail/stock_steps.hpp"

#include <ATen/DeviceAccelerator.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/input_buffer.h>

#include <sstream>

namespace gradd::engine::detail {

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

} // namespace gradd::engine::detail
