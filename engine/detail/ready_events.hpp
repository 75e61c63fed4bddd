#pragma once

// The cross-stream wait before a node runs, shared by every path that calls
// nodes itself.
//
// InputBuffer::add records, for each gradient produced on an accelerator
// stream other than the consumer's, an event on the producer's stream. Before
// the consumer runs, its stream must wait on those events, as
// Engine::evaluate_function does; gradients on the CPU need no wait.

#include <c10/core/Stream.h>

#include <optional>

namespace torch::autograd {
struct InputBuffer;
}

namespace gradd::engine::detail {

/// Makes `stream`, the stream of the node about to run, wait for the
/// gradients of `inputs` that arrived on other accelerator streams.
void wait_for_ready_events(const torch::autograd::InputBuffer& inputs,
                           const std::optional<c10::Stream>& stream);

} // namespace gradd::engine::detail
