// Capture, replay and gradient hand-out of one CUDA graph (see
// backward_graph.hpp).
//
// Gradients handed out without a copy: Note [Lent gradients],
// lent_gradients.cpp.
//
// Which inputs a replay reads where they live: input_binding.cpp.

#include "cuda/backward_graph.hpp"

#include "compiler/stock_order.hpp"
#include "cuda/batched_copy.hpp"
#include "cuda/capture_gate.hpp"
#include "cuda/graph_cache.hpp"
#include "cuda/shape_key.hpp"
#include "cuda/static_buffer.hpp"
#include "engine/detail/current_node.hpp"
#include "engine/detail/stock_steps.hpp"
#include "engine/functional/capture.hpp"
#include "engine/functional/interpret.hpp"
#include "engine/functional/passes.hpp"
#include "engine/functional/steps.hpp"

#include <ATen/core/NamedTensor.h>
#include <ATen/record_function.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/core/GradMode.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/csrc/autograd/utils/grad_layout_contract.h>
#include <torch/csrc/dynamo/compiled_autograd.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <unordered_map>

namespace gradd::cuda {

namespace {

using torch::autograd::variable_list;
namespace functional = engine::functional;

/// A copy of wrapped scalar `t` that stays wrapped: type promotion treats
/// a Python number below any tensor, a plain 0-dim tensor not so.
at::Tensor wrapped_copy(const at::Tensor& t) {
  auto copy = t.clone();
  copy.unsafeGetTensorImpl()->set_wrapped_number(true);
  return copy;
}

/// Makes `stream` wait for the work queued on `other` so far.
void wait_for(c10::cuda::CUDAStream other, c10::cuda::CUDAStream stream) {
  if (other == stream)
    return;
  at::cuda::CUDAEvent queued;
  queued.record(other);
  queued.block(stream);
}

/// One stream capture behind the capture gate (Note [Device synchronizes
/// during captures]) into a private pool of the caching allocator, as
/// at::cuda::CUDAGraph makes it, without the generator registration (see
/// backward_graph::capture). The allocator counts each capture into a pool
/// as one of its users; one that end() ended hands that share to the
/// caller (who gives it back with releasePool once its graph is gone), one
/// that failed gives it back itself. Ends the pool's routing when it goes.
class stream_capture {
public:
  stream_capture(c10::DeviceIndex device, c10::MempoolId_t pool, cudaStream_t stream)
      : device_(device), pool_(pool), stream_(stream) {
    c10::cuda::CUDACachingAllocator::beginAllocateToPool(device, pool, [this](cudaStream_t s) {
      cudaStreamCaptureStatus status;
      c10::CaptureId_t id = 0;
      C10_CUDA_CHECK(cudaStreamGetCaptureInfo(s, &status, &id));
      return status == cudaStreamCaptureStatusActive && id == id_;
    });
    try {
      C10_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      cudaStreamCaptureStatus status;
      C10_CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, &id_));
    } catch (...) {
      stop_allocating();
      throw;
    }
  }

  ~stream_capture() {
    if (capturing_) {
      cudaGraph_t graph = nullptr;
      cudaStreamEndCapture(stream_, &graph);  // invalid already: the first error said why
      if (graph)
        cudaGraphDestroy(graph);
      (void)cudaGetLastError();
      stop_allocating();
    } else {
      c10::cuda::CUDACachingAllocator::endAllocateToPool(device_, pool_);
    }
  }

  stream_capture(const stream_capture&) = delete;
  stream_capture& operator=(const stream_capture&) = delete;

  /// Ends the capture and hands what it captured, and the share of the
  /// pool, to the caller.
  cudaGraph_t end() {
    cudaGraph_t graph = nullptr;
    C10_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    capturing_ = false;
    return graph;
  }

private:
  capture_gate_scope gate_;  // first in, last out: around the whole capture
  c10::DeviceIndex device_;
  c10::MempoolId_t pool_;
  cudaStream_t stream_;
  c10::CaptureId_t id_ = 0;
  bool capturing_ = true;

  /// Ends the routing and gives the pool's share back.
  void stop_allocating() noexcept {
    c10::cuda::CUDACachingAllocator::endAllocateToPool(device_, pool_);
    c10::cuda::CUDACachingAllocator::releasePool(device_, pool_);
  }
};

/// A recording captured into a CUDA graph, and the outputs the capture
/// left in its pool.
struct captured_program {
  cudaGraph_t graph = nullptr;
  functional::program_outputs outputs;
};

/// Captures `recording` run on `inputs` into the private pool `pool`; the
/// caller gives the capture's share of the pool back (stream_capture).
captured_program capture_program(const functional::recording& recording,
                                 const std::vector<torch::autograd::Node*>& nodes,
                                 const std::vector<at::Tensor>& inputs,
                                 const functional::interpret_options& options,
                                 c10::MempoolId_t pool, c10::cuda::CUDAStream side) {
  stream_capture capture(side.device_index(), pool, side.stream());
  auto outputs = functional::interpret(recording, nodes, inputs, options);
  return {capture.end(), std::move(outputs)};
}

} // namespace

capture_request::~capture_request() {
  if (keep_graph)
    return;
  for (uint32_t i = 0; i < backward.ir.nodes.size(); ++i)
    if (backward.ir.nodes[i].needed)
      backward.node(i).release_variables();
}

std::shared_ptr<backward_graph> backward_graph::capture(const capture_request& request,
                                                        c10::cuda::CUDAStream side,
                                                        std::shared_ptr<graph_pool> pool) {
  if (request.delay_ms > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(request.delay_ms));
  c10::cuda::CUDAGuard device(side.device_index());
  request.plan_done->block(side);
  c10::cuda::CUDAStreamGuard on_side(side);
  auto recording = functional::record_lifted(*request.lifted, request.backward, *request.task,
                                             request.num_outputs, side.unwrap());
  functional::run_passes(recording, request.passes);

  std::shared_ptr<backward_graph> g(new backward_graph());
  for (const auto& t : request.lifted->tensor_args.inputs) {
    bool borrowed = t.defined() && t.is_leaf() && t.requires_grad();
    bool baked = wrapped_scalar(t);  // Note [Python scalars in graphs]
    g->borrowed_.push_back(borrowed);
    g->baked_.push_back(baked);
    g->inputs_.push_back(borrowed || !t.defined() ? t : baked ? wrapped_copy(t) : static_copy(t));
    g->captured_at_.push_back(t.defined() ? g->inputs_.back().const_data_ptr() : nullptr);
  }
  at::NoGradGuard no_grad;
  at::NoNamesGuard no_names;
  functional::interpret_options options{functional::leaf_gradients::collect, side.unwrap()};
  // Warm-up: cuBLAS creates its handle and workspace for this stream.
  functional::interpret(recording, request.backward.walk.nodes, g->inputs_, options);
  side.synchronize();

  g->device_ = side.device_index();
  const auto& nodes = request.backward.walk.nodes;
  const auto& table = request.backward.ir;
  // The node of each accumulate_grad op, in op order: the order of the
  // leaf gradients the capture collects.
  std::vector<uint32_t> leaf_nodes;
  for (const auto& o : recording.ir.ops)
    if (o.kind == compiler::op_kind::accumulate_grad)
      leaf_nodes.push_back(o.node);
  auto hooked = [&](uint32_t node) { return table.nodes[node].hooks != compiler::hook_counts{}; };
  // Where leaves are called live, the graph marks where each leaf's
  // gradient is ready, and each waits for its own (Note [Live leaves]).
  auto capture_options = options;
  if (std::any_of(leaf_nodes.begin(), leaf_nodes.end(), hooked)) {
    g->leaf_stream_ = c10::cuda::getStreamFromPool(false, g->device_);
    for (size_t k = 0; k < leaf_nodes.size(); ++k) {
      g->ready_.push_back(nullptr);  // owned by g from here
      C10_CUDA_CHECK(cudaEventCreateWithFlags(&g->ready_.back(), cudaEventDisableTiming));
    }
    capture_options.after_leaf = [&](size_t leaf) {
      C10_CUDA_CHECK(cudaEventRecordWithFlags(g->ready_.at(leaf), side.stream(),
                                              cudaEventRecordExternal));
    };
  }
  auto [graph, outputs] =
      capture_program(recording, nodes, g->inputs_, capture_options, pool->id(), side);
  g->pool_ = std::move(pool);  // with the capture's share of it
  g->graph_ = graph;
  C10_CUDA_CHECK(cudaGraphInstantiate(&g->exec_, g->graph_, 0));
  g->replayed_.emplace();

  // Which outputs are handed out alone (Note [Lent gradients]): the stock
  // engine steals a gradient tensor that nothing else holds.
  std::unordered_map<const c10::TensorImpl*, int> users;
  auto count = [&](const at::Tensor& t) {
    if (t.defined())
      ++users[t.unsafeGetTensorImpl()];
  };
  for (const auto& input : g->inputs_)
    count(input);
  for (const auto& [leaf, gradient] : outputs.leaf_gradients)
    count(gradient);
  for (const auto& result : outputs.results)
    count(result);
  for (auto& [leaf, gradient] : outputs.leaf_gradients) {
    leaf_gradient out;
    out.leaf = leaf;
    out.position = static_cast<uint32_t>(g->leaves_.size());
    out.node = leaf_nodes.at(out.position);
    out.live = hooked(out.node);
    g->live_nodes_ += out.live;
    if (gradient.defined()) {
      out.exclusive = users[gradient.unsafeGetTensorImpl()] == 1;
      out.storage = g->lent_->lend(gradient);
    }
    out.buffer = std::move(gradient);
    g->leaves_.push_back(std::move(out));
  }
  // Handed out as the stock engine reaches them: a leaf's hook sees the
  // `.grad` of the leaves before it written, and of those after it not yet.
  std::vector<uint32_t> reached(table.nodes.size());
  auto order = compiler::stock_order(table);
  for (uint32_t k = 0; k < order.size(); ++k)
    reached[order[k]] = k;
  std::stable_sort(g->leaves_.begin(), g->leaves_.end(),
                   [&](const leaf_gradient& a, const leaf_gradient& b) {
                     return reached[a.node] < reached[b.node];
                   });
  g->lent_->record_use_on(request.stream);  // before the twin's capture
  g->results_ = std::move(outputs.results);
  // The twin of Note [Bound inputs], in a pool of its own that goes with it.
  g->bind_inputs(
      side, request.level,
      [&](const std::vector<at::Tensor>& inputs) {
        auto scratch = at::cuda::graph_pool_handle();
        auto twin = capture_program(recording, nodes, inputs, capture_options, scratch, side);
        c10::cuda::CUDACachingAllocator::releasePool(g->device_, scratch);
        return graph_handle(twin.graph, &cudaGraphDestroy);
      },
      request.lifted->tensor_args.inputs, request.copied);
  g->stale_reads_harmless_ = g->stale_reads_harmless_ && g->find_live_holders(recording);

  size_t copies = 0;
  for (size_t i = 0; i < g->inputs_.size(); ++i)
    if (!g->borrowed_[i] && !g->baked_[i] && g->inputs_[i].defined() && !g->inputs_[i].is_meta())
      copies += g->inputs_[i].storage().nbytes();
  g->pool_bytes_ = g->pool_->recount();  // counted by the pool
  g->bytes_ = g->pool_bytes_ + copies;
  g->copied_early_from_.assign(g->inputs_.size(), nullptr);
  auto& counters = graph_cache::instance().counters;
  counters.bytes.fetch_add(static_cast<int64_t>(copies));
  counters.bound_bytes.fetch_add(static_cast<int64_t>(g->bound_bytes_));
  counters.graphs.fetch_add(1);
  g->counted_ = true;
  return g;
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
  if (pool_)  // its capture's share: the pool's segments go with the last
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
  engine::detail::current_node_scope current;  // Note [The current node]
  current.enter(node);
  RECORD_FUNCTION(c10::str("autograd::engine::evaluate_function: ", node.name()),
                  c10::ArrayRef<const c10::IValue>());
  engine::detail::call_function(node, {std::move(gradient)}, options.keep_graph);
}

void backward_graph::hand_out_live(const std::vector<at::Tensor>& live,
                                   const backward_nodes& backward, c10::cuda::CUDAStream stream,
                                   const replay_options& options) {
  c10::cuda::CUDAStreamGuard on_leaves(*leaf_stream_);
  // Leaf positions are the order the graph writes the gradients: waiting
  // for the latest one handed out so far covers the others, whose `.grad`
  // a hook may read.
  uint32_t needed = 0, waited = 0;  // positions + 1
  try {
    for (auto& leaf : leaves_) {
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
  } catch (...) {
    wait_for(*leaf_stream_, stream);  // what the hooks queued before
    throw;
  }
  wait_for(*leaf_stream_, stream);
}

size_t backward_graph::node_count() const {
  size_t count = 0;
  C10_CUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &count));
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

  // A leaf called live may read its gradient, and so may the hooks around
  // it (a bucket copy of DistributedDataParallel).
  bool read = live_nodes_ > 0;
  if (read) {
    try {
      hand_out_live(live, backward, stream, options);
    } catch (...) {
      mark_replayed(stream);  // the pool's next launch waits for what the hooks queued
      throw;
    }
  } else {
    for (auto& leaf : leaves_)
      read = hand_out(leaf, live[leaf.leaf], options.hand_out) || read;
  }
  variable_list results;
  results.reserve(results_.size());
  for (const auto& result : results_) {
    results.push_back(result.defined() ? layout_copy(result) : result);
    read = read || result.defined();
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
