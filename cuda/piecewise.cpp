// Piecewise graphs: the cuts between a graph's pieces, crossed at a
// replay (see backward_graph.hpp).

#include "cuda/backward_graph.hpp"

#include "cuda/batched_copy.hpp"
#include "cuda/graph_cache.hpp"
#include "cuda/static_buffer.hpp"
#include "execute/stock_steps.hpp"
#include "functional/interpret.hpp"
#include "functional/steps.hpp"

#include <ATen/ops/from_blob.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <chrono>

namespace gradd::cuda {

using torch::autograd::variable_list;

// Note [Piecewise graphs]
// Hooks on activations, Python autograd.Functions (custom Functions,
// reentrant checkpointing, module backward hooks) run host code between
// node calls, where a graph has no place for it; attention with dropout
// reads its seed on the host. Such a node (cut_at,
// functional/graph.cpp) is neither lifted nor recorded: the plan
// run the capture is made from hands over what it returned, after its
// hooks (output_tap), and the recording holds one call_node op returning
// those tensors. The capture ends a graph at each such op and begins the
// next after it, all pieces in one pool; the piece after a cut reads the
// node's outputs from static buffers laid out as the plan's run returned
// them, and where the node's input gradients and the other values in
// flight past it lie is noted, by address: holding them would keep their
// memory from the pieces after. A replay launches the first piece, then
// goes through the leaves in the stock engine's order as Note [Live
// leaves] does; before the first leaf of a later piece (or at the end) it
// crosses the cut: it makes the backward's stream wait for the leaves
// handed out so far (the node's hooks may read their `.grad`), and calls
// the node live on that stream with copies of its input gradients (a hook
// may keep them; the pool's memory is the next replay's), as the current
// node, in libtorch's graph task, hooks and all; then it copies the
// node's outputs into the next piece's buffers and launches that piece. The stock engine runs the same kernels on the same
// values in the same order, so the gradients are bitwise its own. A node
// whose outputs do not fit the next piece (a hook returned another layout,
// or nothing) ends the graphs for that backward: the rest of the recording
// runs eagerly from copies of the values in flight, its leaves handed out
// and its cuts called as they come. Pieces copy all their inputs and
// launch after the lift: no bound inputs, no early launch.

at::Tensor backward_graph::copy_of(const placed_value& v) const {
  auto view = at::from_blob(const_cast<void*>(v.data), v.sizes, v.strides, [](void*) {},
                            at::TensorOptions().dtype(v.dtype).device(c10::kCUDA, device_));
  return static_copy(view);
}

backward_graph::placed_value backward_graph::place(uint32_t value, const at::Tensor& v) {
  return {value, v.const_data_ptr(), v.sizes().vec(), v.strides().vec(), v.scalar_type()};
}

std::optional<variable_list> backward_graph::cross(cut& c, const backward_nodes& backward,
                                                   c10::cuda::CUDAStream stream,
                                                   const replay_options& options) {
  c10::cuda::CUDAStreamGuard on_stream(stream);
  variable_list inputs;
  inputs.reserve(c.inputs.size());
  for (const auto& input : c.inputs)
    inputs.push_back(input ? copy_of(*input) : at::Tensor());
  auto outputs = execute::evaluate_alone(*backward.nodes[c.node], std::move(inputs), options.keep_graph);
  if (outputs.size() != c.outputs.size())
    return outputs;
  std::vector<copy_span> spans;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const auto& now = outputs[k];
    const auto& buffer = c.outputs[k];
    if (now.defined() != buffer.defined())
      return outputs;
    if (!now.defined())
      continue;
    if (now.scalar_type() != buffer.scalar_type() || now.device() != buffer.device()
        || now.sizes() != buffer.sizes() || now.strides() != buffer.strides())
      return outputs;
    if (size_t bytes = span_bytes(now))
      spans.push_back({now.const_data_ptr(), buffer.mutable_data_ptr(), bytes});
  }
  batched_copy(spans, stream.stream());
  auto start = std::chrono::steady_clock::now();
  C10_CUDA_CHECK(cudaGraphLaunch(c.exec, stream.stream()));
  graph_cache::instance().counters.cuda_launch_ns.fetch_add(
      nanoseconds_between(start, std::chrono::steady_clock::now()), std::memory_order_relaxed);
  return std::nullopt;
}

variable_list backward_graph::finish_eagerly(const cut& c, variable_list outputs,
                                             const std::vector<at::Tensor>& live,
                                             const backward_nodes& backward,
                                             c10::cuda::CUDAStream stream,
                                             const replay_options& options) {
  graph_cache::instance().counters.eager_rests.fetch_add(1, std::memory_order_relaxed);
  c10::cuda::CUDAStreamGuard on_stream(stream);
  std::vector<at::Tensor> values(recording_->ir.num_values);
  for (const auto& v : c.in_flight)
    values[v.value] = copy_of(v);
  const auto& call = recording_->ir.ops[c.op];
  for (size_t k = 0; k < call.results.size() && k < outputs.size(); ++k)
    if (call.results[k] != compiler::no_value)
      values[call.results[k]] = std::move(outputs[k]);
  std::vector<const leaf_gradient*> by_position(leaves_.size());
  for (const auto& leaf : leaves_)
    by_position[leaf.position] = &leaf;
  functional::interpret_options rest;
  rest.leaves = functional::leaf_gradients::collect;
  rest.stream = stream.unwrap();
  rest.after_leaf = [&](size_t position, at::Tensor& gradient) {
    const auto& leaf = *by_position.at(position);
    if (leaf.live)
      execute::evaluate_alone(*backward.nodes[leaf.node], {std::move(gradient)}, options.keep_graph);
    else if (gradient.defined())
      functional::accumulate_into_grad(live[leaf.leaf], std::move(gradient));
  };
  rest.call_node = [&](uint32_t at, variable_list inputs, const std::vector<at::Tensor>&) {
    return execute::evaluate_alone(*backward.nodes[recording_->ir.ops[at].node], std::move(inputs),
                          options.keep_graph);
  };
  return functional::interpret_rest(*recording_, backward.nodes, live, rest, c.op + 1,
                                    std::move(values))
      .results;
}

} // namespace gradd::cuda
