// The capture of one CUDA graph (see backward_graph.hpp): its inputs'
// static buffers, the capture itself, the order its gradients are handed
// out in, and what it costs.
//
// A recording captured into graphs, one per piece: program_capture.cpp.
// Gradients shared with an older graph of the structure: Note [Outputs
// shared across shapes], shared_outputs.cpp.

#include "cuda/backward_graph.hpp"

#include "compiler/stock_order.hpp"
#include "cuda/blas_workspace.hpp"
#include "cuda/driver_calls.hpp"
#include "cuda/graph_cache.hpp"
#include "cuda/program_capture.hpp"
#include "cuda/shape_key.hpp"
#include "cuda/shared_outputs.hpp"
#include "cuda/static_buffer.hpp"
#include "functional/capture.hpp"
#include "functional/interpret.hpp"
#include "functional/passes.hpp"

#include <ATen/core/NamedTensor.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/core/GradMode.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/csrc/dynamo/compiled_autograd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <unordered_map>

namespace gradd::cuda {

namespace {

using torch::autograd::variable_list;

/// A copy of wrapped scalar `t` that stays wrapped: type promotion treats
/// a Python number below any tensor, a plain 0-dim tensor not so.
at::Tensor wrapped_copy(const at::Tensor& t) {
  auto copy = t.clone();
  copy.unsafeGetTensorImpl()->set_wrapped_number(true);
  return copy;
}

/// Whether node `node` of `table` has hooks: a leaf's are called live
/// (Note [Live leaves]).
bool hooked(const compiler::graph& table, uint32_t node) {
  return table.nodes[node].hooks != compiler::hook_counts{};
}

} // namespace

capture_request::~capture_request() {
  if (keep_graph)
    return;
  for (uint32_t i = 0; i < backward.ir.nodes.size(); ++i)
    if (backward.ir.nodes[i].needed)
      backward.node(i).release_variables();
}

void backward_graph::take_inputs(const std::vector<at::Tensor>& lifted) {
  for (const auto& t : lifted) {
    bool borrowed = t.defined() && t.is_leaf() && t.requires_grad();
    bool baked = wrapped_scalar(t);  // Note [Python scalars in graphs]
    borrowed_.push_back(borrowed);
    baked_.push_back(baked);
    inputs_.push_back(borrowed || !t.defined() ? t : baked ? wrapped_copy(t) : static_copy(t));
    captured_at_.push_back(t.defined() ? inputs_.back().const_data_ptr() : nullptr);
  }
}

backward_graph::op_roles backward_graph::read_ops(const functional::recording& recording,
                                                  const compiler::graph& table,
                                                  const capture_request& request) {
  op_roles roles;
  roles.is_input.resize(recording.ir.num_values);
  for (uint32_t i = 0; i < recording.ir.ops.size(); ++i) {
    const auto& o = recording.ir.ops[i];
    if (o.kind == compiler::op_kind::accumulate_grad) {
      roles.leaf_nodes.push_back(o.node);
      roles.leaf_pieces.push_back(static_cast<uint32_t>(cuts_.size()));
    } else if (o.kind == compiler::op_kind::call_node) {
      cut c;
      c.node = o.node;
      c.op = i;
      const auto& info = table.nodes[o.node];
      const char* why = info.hooks != compiler::hook_counts{}            ? "hooks"
                        : info.type_name == "torch::autograd::PyNode" ? "a Python Function"
                                                                       : "state on the host";
      cut_names_ += (cut_names_.empty() ? "" : ", ") + std::to_string(o.node) + " ("
                    + info.type_name.substr(info.type_name.rfind(':') + 1) + ": " + why + ")";
      for (const auto& t : request.cut_outputs.at(o.node))
        c.outputs.push_back(t.defined() ? static_copy(t) : at::Tensor());
      cuts_.push_back(std::move(c));
    } else if (o.kind == compiler::op_kind::graph_input) {
      for (auto v : o.results)
        if (v != compiler::no_value)
          roles.is_input[v] = true;
    }
  }
  return roles;
}

void backward_graph::take_leaves(functional::program_outputs& outputs, const op_roles& roles,
                                 const compiler::graph& table) {
  // Which outputs are handed out alone (Note [Lent gradients]): the stock
  // engine steals a gradient tensor that nothing else holds.
  std::unordered_map<const c10::TensorImpl*, int> users;
  auto count = [&](const at::Tensor& t) {
    if (t.defined())
      ++users[t.unsafeGetTensorImpl()];
  };
  for (const auto& input : inputs_)
    count(input);
  for (const auto& [leaf, gradient] : outputs.leaf_gradients)
    count(gradient);
  for (const auto& result : outputs.results)
    count(result);
  for (auto& [leaf, gradient] : outputs.leaf_gradients) {
    leaf_gradient out;
    out.leaf = leaf;
    out.position = static_cast<uint32_t>(leaves_.size());
    out.node = roles.leaf_nodes.at(out.position);
    out.piece = roles.leaf_pieces.at(out.position);
    out.live = hooked(table, out.node);
    live_nodes_ += out.live;
    if (gradient.defined())
      out.exclusive = users[gradient.unsafeGetTensorImpl()] == 1;
    out.buffer = std::move(gradient);
    leaves_.push_back(std::move(out));
  }
  // Handed out as the stock engine reaches them: a leaf's hook sees the
  // `.grad` of the leaves before it written, and of those after it not yet.
  // A piece's leaves come once it is launched.
  std::vector<uint32_t> reached(table.nodes.size());
  auto order = compiler::stock_order(table);
  for (uint32_t k = 0; k < order.size(); ++k)
    reached[order[k]] = k;
  std::stable_sort(leaves_.begin(), leaves_.end(),
                   [&](const leaf_gradient& a, const leaf_gradient& b) {
                     return std::pair(a.piece, reached[a.node]) < std::pair(b.piece, reached[b.node]);
                   });
  results_ = std::move(outputs.results);
}

void backward_graph::count_bytes(size_t scratch_bytes) {
  size_t copies = scratch_bytes + capture_workspace_bytes_;
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (!borrowed_[i] && !baked_[i] && inputs_[i].defined() && !inputs_[i].is_meta())
      copies += inputs_[i].storage().nbytes();
  for (const auto& c : cuts_)
    for (const auto& t : c.outputs)
      if (t.defined())
        copies += t.storage().nbytes();
  pool_bytes_ = pool_->recount();  // counted by the pool
  bytes_ = pool_bytes_ + copies;
  auto& counters = graph_cache::instance().counters;
  counters.bytes.fetch_add(static_cast<int64_t>(copies));
  counters.bound_bytes.fetch_add(static_cast<int64_t>(bound_bytes_));
  counters.graphs.fetch_add(1);
  counted_ = true;
}

void backward_graph::read_training_workspace(capture_workspaces& workspace,
                                             c10::cuda::CUDAStream training) {
  if (!driver().rebinds()) {
    // Its kernels' arguments cannot be read, so its pointers stay.
    workspace_stream_ = training.stream();
    for (const auto& own : workspace.own())
      capture_workspace_bytes_ += own.bytes;
    capture_workspaces_ = workspace.give_up();
    return;
  }
  std::vector<device_range> read;
  for (const auto& own : workspace.own()) {
    bool reads = points_into(graph_, {own});
    for (const auto& c : cuts_)
      reads = reads || points_into(c.graph, {own});
    if (reads)
      read.push_back(own);
  }
  if (read.empty())
    return;
  workspace_stream_ = training.stream();
  auto moves = workspace.hand_over(read);
  if (moves.empty())
    return;  // the capture's own became the training stream's
  move_pointers(graph_, exec_, moves);
  if (!bound_.move_pointers(exec_, moves))
    throw std::runtime_error("the CUDA driver refused a bound kernel's move to the training "
                             "stream's cuBLAS workspace (" + bound_.refusal() + ")");
  for (auto& c : cuts_)
    move_pointers(c.graph, c.exec, moves);
}

std::shared_ptr<backward_graph> backward_graph::capture(const capture_request& request,
                                                        c10::cuda::CUDAStream side,
                                                        std::shared_ptr<graph_pool> pool,
                                                        std::vector<at::Tensor> kin) {
  if (request.delay_ms > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(request.delay_ms));
  // Eager work on the training stream, captures on `side`, both with
  // cuBLAS workspaces of the capture's own until its trials are done (Note
  // [One cuBLAS workspace per training stream]).
  auto training = request.stream;
  c10::cuda::CUDAGuard device(training.device_index());
  capture_workspaces workspace(training, side);
  c10::cuda::CUDAStreamGuard on_training(training);
  auto recording = functional::record_lifted(*request.lifted, request.backward, *request.task,
                                             request.num_outputs, training.unwrap(),
                                             request.cut_outputs);
  functional::run_passes(recording, request.passes);

  std::shared_ptr<backward_graph> g(new backward_graph());
  g->take_inputs(request.lifted->tensor_args.inputs);
  at::NoGradGuard no_grad;
  at::NoNamesGuard no_names;
  g->device_ = training.device_index();
  const auto& nodes = request.backward.walk.nodes;
  const auto& table = request.backward.ir;
  auto roles = g->read_ops(recording, table, request);
  auto cut_of = [&](uint32_t at) -> cut& {
    return *std::find_if(g->cuts_.begin(), g->cuts_.end(), [at](const cut& c) { return c.op == at; });
  };

  functional::interpret_options options;
  options.leaves = functional::leaf_gradients::collect;
  options.stream = training.unwrap();
  options.call_node = [&](uint32_t at, variable_list, const std::vector<at::Tensor>&) {
    return cut_of(at).outputs;
  };
  // Warm-up: kernels' modules load before the capture. It writes no memory
  // of the pool.
  functional::interpret(recording, nodes, g->inputs_, options);

  // Where leaves are called live or the graph is cut, the graph marks
  // where each leaf's gradient is ready, and each waits for its own (Note
  // [Live leaves]).
  auto capture_options = options;
  capture_options.stream = side.unwrap();
  // Pieces share no outputs: a piece's leaves are handed out between cuts.
  shared_outputs shared = g->cuts_.empty() && !kin.empty() ? shared_outputs(std::move(kin))
                                                           : shared_outputs();
  bool marks_leaves = !g->cuts_.empty()
                      || std::any_of(roles.leaf_nodes.begin(), roles.leaf_nodes.end(),
                                     [&](uint32_t node) { return hooked(table, node); });
  if (marks_leaves) {
    g->leaf_stream_ = c10::cuda::getStreamFromPool(false, g->device_);
    for (size_t k = 0; k < roles.leaf_nodes.size(); ++k) {
      g->ready_.push_back(nullptr);  // owned by g from here
      C10_CUDA_CHECK(cudaEventCreateWithFlags(&g->ready_.back(), cudaEventDisableTiming));
    }
  }
  capture_options.after_leaf = [&](size_t leaf, at::Tensor& gradient) {
    shared.divert(leaf, gradient, side.stream());
    if (marks_leaves)
      C10_CUDA_CHECK(cudaEventRecordWithFlags(g->ready_.at(leaf), side.stream(),
                                              cudaEventRecordExternal));
  };
  // At a cut, where the node's inputs and the values in flight past it lie.
  auto at_cut = [&](uint32_t at, const variable_list& inputs,
                    const std::vector<at::Tensor>& in_flight) {
    auto& c = cut_of(at);
    for (const auto& t : inputs)
      c.inputs.push_back(t.defined() ? std::optional(place(0, t)) : std::nullopt);
    for (uint32_t v = 0; v < in_flight.size(); ++v)
      if (in_flight[v].defined() && !roles.is_input[v])
        c.in_flight.push_back(place(v, in_flight[v]));
    return c.outputs;
  };
  auto [graphs, outputs] =
      capture_program(recording, nodes, g->inputs_, capture_options, pool->id(), side, at_cut);
  g->pool_ = std::move(pool);  // with each capture's share of it
  g->graph_ = graphs[0];
  for (size_t k = 0; k < g->cuts_.size(); ++k)
    g->cuts_[k].graph = graphs[k + 1];
  C10_CUDA_CHECK(cudaGraphInstantiate(&g->exec_, g->graph_, 0));
  for (auto& c : g->cuts_)
    C10_CUDA_CHECK(cudaGraphInstantiate(&c.exec, c.graph, 0));
  g->live_nodes_ = g->cuts_.size();
  g->replayed_.emplace();

  g->take_leaves(outputs, roles, table);
  if (g->cuts_.empty()) {
    // The twin of Note [Bound inputs], in a pool of its own that goes with it.
    g->bind_inputs(
        training, request.level,
        [&](const std::vector<at::Tensor>& inputs) {
          auto scratch = at::cuda::graph_pool_handle();
          auto twin = capture_program(recording, nodes, inputs, capture_options, scratch, side, {});
          c10::cuda::CUDACachingAllocator::releasePool(g->device_, scratch);
          return graph_handle(twin.graphs[0], &cudaGraphDestroy);
        },
        request.lifted->tensor_args.inputs, request.copied);
    g->stale_reads_harmless_ = g->stale_reads_harmless_ && g->find_live_holders(recording);
  } else {
    // Pieces copy their inputs and launch after the lift.
    g->stale_reads_harmless_ = false;
    g->recording_ = std::make_shared<const functional::recording>(std::move(recording));
  }
  g->read_training_workspace(workspace, training);
  // Its trials done, it writes the gradients it shares where the older
  // graph does (Note [Outputs shared across shapes]); then they are lent.
  shared.redirect(g->graph_, g->exec_);
  for (auto& leaf : g->leaves_) {
    if (const auto& into = shared.buffer(leaf.position); into.defined())
      leaf.buffer = into;
    if (leaf.buffer.defined())
      leaf.storage = g->lent_->lend(leaf.buffer);
  }
  g->lent_->record_use_on(request.stream);
  g->sharing_ = shared.summary();
  g->copied_early_from_.assign(g->inputs_.size(), nullptr);
  g->count_bytes(shared.scratch_bytes());
  return g;
}

} // namespace gradd::cuda
