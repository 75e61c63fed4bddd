// The cross-stream wait before a node runs (see ready_events.hpp).
//
// A straight copy of the loop in Engine::evaluate_function: every defined
// accelerator gradient has a ready stream, and one that differs from the
// node's stream has a ready event to wait on.

#include "engine/detail/ready_events.hpp"

#include <ATen/DeviceAccelerator.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/input_buffer.h>

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

} // namespace gradd::engine::detail
