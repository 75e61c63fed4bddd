#pragma once

// The stock engine's steps around a node call that gradd repeats wherever it
// calls nodes itself (plans, functional capture, the nodes a CUDA graph
// backward calls live): the cross-stream wait before the call, the call
// with its hooks, and the output check after it. libtorch keeps them inside
// engine.cpp; these restate them.
//
// InputBuffer::add records, for each gradient produced on an accelerator
// stream other than the consumer's, an event on the producer's stream. Before
// the consumer runs, its stream must wait on those events, as
// Engine::evaluate_function does; gradients on the CPU need no wait.

#include <c10/core/Stream.h>
#include <torch/csrc/autograd/variable.h>

#include <optional>

namespace torch::autograd {
struct InputBuffer;
struct Node;
}

namespace gradd::execute {

/// Makes `stream`, the stream of the node about to run, wait for the
/// gradients of `inputs` that arrived on other accelerator streams.
void wait_for_ready_events(const torch::autograd::InputBuffer& inputs,
                           const std::optional<c10::Stream>& stream);

/// The stock engine's output check of node `fn` (shape, dtype, device of
/// each gradient against its edge), with the stock engine's message; may
/// replace gradients in `grads`.
void validate_node_outputs(torch::autograd::Node& fn, torch::autograd::variable_list& grads);

/// Runs `fn`'s tensor pre-hooks and retain_grad hooks on `inputs`, as
/// call_function does before the node, and evaluate_function before taking
/// the captures of a node that does not run.
torch::autograd::variable_list call_tensor_pre_hooks(torch::autograd::Node& fn,
                                                     torch::autograd::variable_list inputs);

/// The stock engine's call_function: `fn` called on `inputs` with its
/// hooks around it, its outputs checked; saved variables marked for release
/// unless `keep_graph`. Post-hooks registered while `fn` ran (from a saved
/// tensor's unpack hook, say) are called too, without inputs, as engine.cpp
/// calls them.
torch::autograd::variable_list call_function(torch::autograd::Node& fn,
                                             torch::autograd::variable_list inputs,
                                             bool keep_graph);

/// call_function as Engine::evaluate_function makes it for a node called
/// alone (a node a CUDA graph backward calls live): `fn` the current node
/// (Note [The current node]) inside the engine's profiler range.
torch::autograd::variable_list evaluate_alone(torch::autograd::Node& fn,
                                              torch::autograd::variable_list inputs,
                                              bool keep_graph);

} // namespace gradd::execute
