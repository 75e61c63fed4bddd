// Replay and gradient hand-out of one CUDA graph (see backward_graph.hpp);
// its capture: graph_capture.cpp.
//
// Gradients handed out without a copy: Note [Lent gradients],
// lent_gradients.cpp.
//
// Which inputs a replay reads where they live: input_binding.cpp.
//
// The cuts between the pieces of a graph, crossed at a replay: Note
// [Piecewise graphs], piecewise.cpp.

#include "cuda/backward_graph.hpp"

#include "cuda/batched_copy.hpp"
#include "cuda/graph_cache.hpp"
#include "cuda/static_buffer.hpp"
#include "execute/stock_steps.hpp"
#include "functional/steps.hpp"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/autograd/utils/grad_layout_contract.h>

#include <chrono>

namespace gradd::cuda {

namespace {

using torch::autograd::variable_list;

/// Makes `stream` wait for the work queued on `other` so far.
void wait_for(c10::cuda::CUDAStream other, c10::cuda::CUDAStream stream) {
  if (other == stream)
    return;
  at::cuda::CUDAEvent queued;
  queued.record(other);
  queued.block(stream);
}

} // namespace

std::vector<at::Tensor> backward_graph::kin_buffers(const graph_pool& pool) const {
  if (pool_.get() != &pool || !cuts_.empty())
    return {};
  std::vector<at::Tensor> by_position(leaves_.size());
  for (const auto& leaf : leaves_)
    by_position[leaf.position] = leaf.buffer;
  return by_position;
}

backward_graph::~backward_graph() {
  if (counted_) {
    auto& counters = graph_cache::instance().counters;
    counters.bytes.fetch_sub(static_cast<int64_t>(bytes_ - pool_bytes_));
    counters.bound_bytes.fetch_sub(static_cast<int64_t>(bound_bytes_));
    counters.graphs.fetch_sub(1);
  }
  if (replayed_)
    replayed_->synchronize();  // a no-op where it never launched
  for (auto ready : ready_)
    if (ready)
      cudaEventDestroy(ready);
  if (exec_)
    cudaGraphExecDestroy(exec_);
  if (graph_)
    cudaGraphDestroy(graph_);
  for (const auto& c : cuts_) {
    if (c.exec)
      cudaGraphExecDestroy(c.exec);
    if (c.graph)
      cudaGraphDestroy(c.graph);
  }
  if (pool_)  // each capture's share: the pool's segments go with the last
    for (size_t piece = 0; piece < pieces(); ++piece)
      c10::cuda::CUDACachingAllocator::releasePool(device_, pool_->id());
}

const std::string* backward_graph::rebind_refusal() const noexcept {
  return rebind_refused_.load(std::memory_order_acquire) ? &rebind_refusal_ : nullptr;
}

backward_graph::fit backward_graph::fit_of(const std::vector<at::Tensor>& live) const {
  if (live.size() != inputs_.size())
    return fit::different;
  for (size_t i = 0; i < live.size(); ++i) {
    const auto& now = live[i];
    const auto& then = inputs_[i];
    if (now.defined() != then.defined())
      return fit::different;  // e.g. saved variables released: the plan raises
    if (!now.defined())
      continue;
    auto device = then.is_meta() ? c10::Device(c10::kCUDA, device_) : then.device();
    if (now.scalar_type() != then.scalar_type() || now.device() != device
        || now.sizes() != then.sizes() || now.strides() != then.strides())
      return fit::different;
    if (borrowed_[i] && now.const_data_ptr() != captured_at_[i])
      return fit::parameter_moved;
  }
  return fit::fits;
}

void backward_graph::follow_last_launch(c10::cuda::CUDAStream stream) {
  auto last = pool_->last_launched.lock();
  if (last && last->replayed_on_ && *last->replayed_on_ != stream)
    last->replayed_->block(stream);
  pool_->last_launched = weak_from_this();
}

bool backward_graph::lent_to_another_thread() const {
  return pool_->last_lent && pool_->last_lent->held_by_another_thread();
}

void backward_graph::follow_pool(c10::cuda::CUDAStream stream, c10::cuda::CUDAStream caller) {
  auto& last = pool_->last_lent;
  wait_for(caller, stream);  // the backward's inputs
  follow_last_launch(stream);
  if (last) {
    last->take_back();
    // Its holders may have reads of the lent gradients queued on their
    // stream still, made before they let go of them.
    if (last->handed_out_on() && *last->handed_out_on() != caller)
      wait_for(*last->handed_out_on(), stream);
  }
  last = lent_;
}

bool backward_graph::lends_alone(const leaf_gradient& g, const at::Tensor& variable,
                                 grad_hand_out mode) const {
  // The buffer has the geometry of the tensor lent on it.
  return mode == grad_hand_out::borrow && !variable.grad().defined() && g.exclusive
         && torch::autograd::utils::obeys_layout_contract(g.buffer, variable);
}

bool backward_graph::hand_out(leaf_gradient& g, const at::Tensor& variable,
                              grad_hand_out mode) {
  if (!g.buffer.defined())
    return false;
  at::Tensor lent = lent_->tensor(g.storage, g.buffer);
  if (lends_alone(g, variable, mode)) {
    variable.mutable_grad() = std::move(lent);  // what the stock engine's steal leaves
    return false;
  }
  // Still referenced here, so the stock AccumulateGrad copies or adds.
  functional::accumulate_into_grad(variable, at::Tensor(lent));
  return true;
}

// Note [Live leaves]
// A graph holds kernels, and a hook is host code that runs between node
// calls; yet the hooks most training loops have sit where nothing in the
// graph follows them: on leaves. DistributedDataParallel puts a post-hook
// on every parameter's AccumulateGrad, which copies `.grad` into its bucket
// and launches the bucket's all-reduce; optimizers in backward use
// post-accumulate-grad hooks, clipping a tensor hook on the parameter. An
// AccumulateGrad node has no outputs, so what its hooks do reaches no other
// node. A structure whose only hooks are on leaves that run is captured
// whole, each leaf's gradient a graph output, with an external event
// recorded in the graph right after each leaf's gradient is written. Once
// the graph is launched, while it runs, the replay calls each leaf in the
// order the stock engine reaches them, on a stream of leaves that first
// waits for that leaf's event: the hooked ones through call_function with
// their gradient, as the current node, inside libtorch's graph task (so
// DDP's final callback is queued), the others handed out. So what a hook
// queues (DDP's bucket copy and all-reduce) starts on the device where the
// stock engine starts it and overlaps the rest of the graph, as in eager.
// A hook sees the gradient the stock engine gives it, and the `.grad` of
// the leaves before it written, those after not yet; only the current
// stream differs (the leaves', not the backward's). The backward's stream
// then waits for the leaves'. Hooks on any other node, or on a leaf that
// only captures (its tensor hooks change what autograd::grad returns),
// would need the graph cut at them: such a structure stays on plans
// (hooks_inside_graph, graph_hit.cpp).

void backward_graph::call_live(leaf_gradient& g, torch::autograd::Node& node,
                               const replay_options& options) {
  at::Tensor gradient;
  if (g.buffer.defined())
    gradient = lent_->tensor(g.storage, g.buffer);
  // Held here as well, it is copied into `.grad` instead of stolen: where
  // the stock engine would hold it twice too, or copies are asked for.
  at::Tensor held;
  if (options.hand_out != grad_hand_out::borrow || !g.exclusive)
    held = gradient;
  execute::evaluate_alone(node, {std::move(gradient)}, options.keep_graph);
}

std::optional<variable_list> backward_graph::hand_out_live(const std::vector<at::Tensor>& live,
                                                           const backward_nodes& backward,
                                                           c10::cuda::CUDAStream stream,
                                                           const replay_options& options) {
  c10::cuda::CUDAStreamGuard on_leaves(*leaf_stream_);
  // Leaf positions are the order the graph writes the gradients: waiting
  // for the latest one handed out so far covers the others, whose `.grad`
  // a hook may read.
  uint32_t needed = 0, waited = 0;  // positions + 1
  size_t crossed = 0;  // cuts
  std::optional<variable_list> rest;  // the results, where the rest ran eagerly
  // Crosses the cuts before `piece`; false where one ended the graphs.
  auto cross_to = [&](size_t piece) {
    for (; crossed < piece; ++crossed) {
      // The `.grad` of the leaves before, which its hooks may read.
      wait_for(*leaf_stream_, stream);
      if (auto outputs = cross(cuts_[crossed], backward, stream, options)) {
        rest = finish_eagerly(cuts_[crossed], std::move(*outputs), live, backward, stream, options);
        return false;
      }
    }
    return true;
  };
  try {
    for (auto& leaf : leaves_) {
      if (!cross_to(leaf.piece))
        return rest;
      needed = std::max(needed, leaf.position + 1);
      const auto& variable = live[leaf.leaf];
      bool device_work = leaf.live || (leaf.buffer.defined()
                                       && !lends_alone(leaf, variable, options.hand_out));
      if (device_work && needed > waited) {
        C10_CUDA_CHECK(cudaStreamWaitEvent(leaf_stream_->stream(), ready_[needed - 1], 0));
        waited = needed;
      }
      if (leaf.live)
        call_live(leaf, *backward.nodes[leaf.node], options);
      else
        hand_out(leaf, variable, options.hand_out);
    }
    if (!cross_to(cuts_.size()))
      return rest;
  } catch (...) {
    wait_for(*leaf_stream_, stream);  // what the hooks queued before
    throw;
  }
  wait_for(*leaf_stream_, stream);
  return std::nullopt;
}

size_t backward_graph::node_count() const {
  size_t count = 0;
  C10_CUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &count));
  for (const auto& c : cuts_) {
    size_t piece = 0;
    C10_CUDA_CHECK(cudaGraphGetNodes(c.graph, nullptr, &piece));
    count += piece;
  }
  return count;
}

void backward_graph::launch(c10::cuda::CUDAStream stream) {
  auto start = std::chrono::steady_clock::now();
  C10_CUDA_CHECK(cudaGraphLaunch(exec_, stream.stream()));
  graph_cache::instance().counters.cuda_launch_ns.fetch_add(
      nanoseconds_between(start, std::chrono::steady_clock::now()), std::memory_order_relaxed);
  mark_replayed(stream);
}

void backward_graph::mark_replayed(c10::cuda::CUDAStream stream) {
  replayed_->record(stream);
  replayed_on_ = stream;
}

std::optional<variable_list> backward_graph::replay(const std::vector<at::Tensor>& live,
                                                    const backward_nodes& backward,
                                                    c10::cuda::CUDAStream stream,
                                                    const replay_options& options,
                                                    std::optional<early_launch> early) {
  if (!early && !launches_on(stream)) {
    graph_cache::instance().counters.other_stream.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  auto turn = early ? std::move(early->turn_) : pool_->try_take();
  if (!turn)
    return std::nullopt;
  auto start = std::chrono::steady_clock::now();
  c10::cuda::CUDAGuard device(stream.device_index());
  if (!early && lent_to_another_thread()) {
    graph_cache::instance().counters.lent_elsewhere.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  auto caller = c10::cuda::getCurrentCUDAStream(stream.device_index());
  if (!early)
    follow_pool(stream, caller);
  launchable_at_frees_.reset();  // until this replay's addresses are noted
  lent_->hand_out_on(caller);

  c10::cuda::CUDAStreamGuard on_stream(stream);
  std::vector<copy_span> spans;
  spans.reserve(live.size());
  bool binds = !bound_.empty();
  std::vector<const void*> sources(binds ? live.size() : 0);
  for (size_t i = 0; i < live.size(); ++i) {
    if (borrowed_[i] || baked_[i] || !live[i].defined())
      continue;
    if (inputs_[i].is_meta())
      sources[i] = live[i].const_data_ptr();
    else if (early && copied_early_from_[i] == live[i].const_data_ptr())
      continue;  // copied in from its holder before the early launch
    else if (size_t bytes = span_bytes(live[i]))
      spans.push_back({live[i].const_data_ptr(), inputs_[i].mutable_data_ptr(), bytes});
  }
  auto& counters = graph_cache::instance().counters;
  size_t rewritten = 0;
  if (binds) {
    auto rewrites = bound_.bind(exec_, sources);
    if (!rewrites) {  // the plan serves this backward; the graph is dropped (graph_hit.cpp)
      if (early)
        counters.early_misses.fetch_add(1, std::memory_order_relaxed);
      if (!rebind_refused_.load(std::memory_order_relaxed)) {
        rebind_refusal_ = bound_.refusal();
        rebind_refused_inputs_ = bound_.refused_inputs();
        rebind_refused_.store(true, std::memory_order_release);
      }
      return std::nullopt;
    }
    rewritten = *rewrites;
    counters.rewrites.fetch_add(rewritten, std::memory_order_relaxed);
  }
  // An early launch read every input where this one finds it, unless an
  // input moved or is copied from elsewhere: then it launches again, over
  // its outputs.
  bool moved = rewritten > 0 || !spans.empty();
  if (early && moved)
    counters.early_misses.fetch_add(1, std::memory_order_relaxed);
  batched_copy(spans, stream.stream());
  auto copied = std::chrono::steady_clock::now();
  if (!early || moved)
    launch(stream);
  if (options.notes_bets)  // what it copies, an early launch copies from the live holders
    note_addresses(live, rewritten > 0, backward);
  auto launched = std::chrono::steady_clock::now();

  // A node called live may read its gradients, and so may the hooks around
  // it (a bucket copy of DistributedDataParallel).
  bool read = live_nodes_ > 0;
  std::optional<variable_list> rest;  // the results, where the rest ran eagerly
  if (read) {
    try {
      rest = hand_out_live(live, backward, stream, options);
    } catch (...) {
      mark_replayed(stream);  // the pool's next launch waits for what the hooks queued
      throw;
    }
  } else {
    for (auto& leaf : leaves_)
      read = hand_out(leaf, live[leaf.leaf], options.hand_out) || read;
  }
  variable_list results;
  if (rest) {
    results = std::move(*rest);
  } else {
    results.reserve(results_.size());
    for (const auto& result : results_) {
      results.push_back(result.defined() ? layout_copy(result) : result);
      read = read || result.defined();
    }
  }
  if (read)  // the pool's next launch waits for these reads too
    mark_replayed(stream);
  counters.copy_ns.fetch_add(nanoseconds_between(start, copied), std::memory_order_relaxed);
  counters.launch_ns.fetch_add(nanoseconds_between(copied, launched), std::memory_order_relaxed);
  counters.hand_out_ns.fetch_add(nanoseconds_between(launched, std::chrono::steady_clock::now()),
                                 std::memory_order_relaxed);
  return results;
}

} // namespace gradd::cuda
