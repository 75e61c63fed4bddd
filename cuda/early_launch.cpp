// A graph launched before its backward's lift (see backward_graph.hpp).
//
// Note [Early launch]
// On a graph hit the GPU waited for the whole lift (the saved tensors read
// through `compiled_args` and the shape key): 31–53% of the gap to the
// floor on a Hopper GPU. In a steady training loop the lift finds what the
// last replay found: the same shape, every input at the same address. So a
// structure whose last two graph-path backwards had one shape launches
// that shape's graph right after the walk, as the last replay left it (in
// a C++ process before Engine::execute even, Note [Bets before the
// engine]), and lifts while the GPU runs. The lift then checks the bet: if the shape and
// every input's address are the ones the graph read, the gradients it
// wrote are handed out; if an input moved, the graph is pointed at it and
// launched again over the first launch's outputs; if the shape differs,
// the first launch's outputs are abandoned and the backward goes on as any
// other (another graph or the plan). Nothing of a lost bet is handed out:
// lent gradients are taken back before the first launch, as for any replay.
//
// A lost bet reads the addresses of the backward before, whose tensors
// may be gone. Reading memory that is not mapped any more kills the CUDA
// context; reading memory that now holds something else is harmless when
// nothing is written there and the outputs are thrown away, but not for an
// index: a stale one sends a kernel out of bounds or trips its device
// assert (seen on a Hopper GPU: convnet's `nll_loss` backward read its targets
// stale and asserted, which ends the process's CUDA context). So the
// integer inputs wide enough to index (max-pool indices, a loss's targets;
// ATen indexes with 32- and 64-bit integers) are read live: each
// is held by one node (found in the recording at capture), which is lifted
// alone before the early launch, and the graph is pointed at its tensor.
// Live indices are in bounds only for the shape their node was captured
// with (a max-pool's index the plane of its input, the graph's buffer has
// the captured size), so the launch waits for the full lift unless that
// node's lift alone has the shape key it had at a replay of this graph.
// Floating, complex, boolean and 8-bit integer inputs are read as data,
// not as addresses: bytes are what cuDNN's RNN keeps for its backward (its
// reserve), whose live read lifted the whole RNN node before each launch
// (20–25 µs of the lstm's 30–43 µs launch on a Hopper GPU).
// A graph launches early only if
// - no replay writes into a bound input (checked once, at capture, by a
//   replay on copies; its own static buffers and pool it may write), and
//   each bound integer input has one node that reads it;
// - each input it copies (where its binding did not hold) is held by one
//   node, lifted alone before the launch and copied in from there, as the
//   integer inputs are pointed at; at most 16 such nodes
//   (max_live_holders). A root gradient is held by the root: the
//   recording's only reader of it is the root edge's node, whose lift does
//   not hold it (find_holder; a graph that copied one instead, one shape
//   in a third of the convnet's sweeps, never launched early);
// - at its last replay no input had moved, and every address it read lay
//   in a storage of the CUDA caching allocator (its deleter), with caching
//   on: such memory stays mapped until the allocator frees or unmaps a
//   segment;
// - the device's count of segment frees and unmaps
//   (`DeviceStats::num_device_free`: `empty_cache`, a retry after an
//   out-of-memory, a released graph pool, expandable segments shrinking)
//   has not changed since that replay.
// Parameters are read where they were captured; a moved one shows at the
// lift (fit::parameter_moved), and its old address counts as above.
// `cuda_graphs.early_launch: false` turns it off; `graph_early_launches`
// and `graph_early_misses` count bets and lost ones.

#include "cuda/backward_graph.hpp"

#include "cuda/graph_cache.hpp"
#include "cuda/lift_alone.hpp"
#include "cuda/static_buffer.hpp"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/env.h>

#include <algorithm>
#include <deque>
#include <typeinfo>
#include <unordered_map>

namespace gradd::cuda {

namespace {

namespace allocator = c10::cuda::CUDACachingAllocator;

/// Whether memory of the process's CUDA allocator stays mapped until it
/// counts a segment free: the native caching allocator, caching.
bool allocator_counts_frees() {
  static const bool counts = allocator::get()->name() == "native"
                             && c10::utils::check_env("PYTORCH_NO_CUDA_MEMORY_CACHING") != true;
  return counts;
}

/// Segments the caching allocator has freed or unmapped on `device`.
int64_t segment_frees(c10::DeviceIndex device) {
  return allocator::getDeviceStats(device).num_device_free;
}

/// The most nodes an early launch lifts alone to read inputs live: each
/// lift is CPU time before the launch, and a graph that copies most of its
/// inputs would lift most of its nodes (resnet18's copying graph: 140
/// inputs).
constexpr size_t max_live_holders = 16;

/// Whether an input of type `t` may hold indices, which an early launch
/// reads live; 8-bit integers are bytes, read as data.
bool may_index(at::ScalarType t) {
  return at::isIntegralType(t, false) && c10::elementSize(t) > 1;
}

/// The edges from `backward`'s second node (the root edge's) to its node
/// `target`, each by its index, the fewest there are; nullopt where none
/// lead there.
std::optional<std::vector<uint32_t>> path_from_head(const backward_nodes& backward,
                                                    uint32_t target) {
  using torch::autograd::Node;
  const auto& nodes = backward.nodes;
  if (nodes.size() < 2 || target >= nodes.size())
    return std::nullopt;
  std::unordered_map<const Node*, std::pair<const Node*, uint32_t>> came_from{
      {nodes[1], {nullptr, 0}}};
  std::deque<const Node*> queue{nodes[1]};
  while (!queue.empty()) {
    const Node* node = queue.front();
    queue.pop_front();
    if (node == nodes[target]) {
      std::vector<uint32_t> path;
      for (auto step = came_from.at(node); step.first; step = came_from.at(step.first))
        path.push_back(step.second);
      std::reverse(path.begin(), path.end());
      return path;
    }
    const auto& edges = node->next_edges();
    for (uint32_t k = 0; k < edges.size(); ++k)
      if (const Node* next = edges[k].function.get(); next && came_from.try_emplace(next, node, k).second)
        queue.push_back(next);
  }
  return std::nullopt;
}

} // namespace

bool backward_graph::find_live_holders(const functional::recording& recording) {
  using compiler::op_kind;
  std::vector<uint32_t> nodes;
  for (uint32_t i = 0; i < inputs_.size(); ++i) {
    const auto& input = inputs_[i];
    bool index = input.is_meta() && may_index(input.scalar_type());
    bool copied = !borrowed_[i] && !baked_[i] && input.defined() && !input.is_meta()
                  && span_bytes(input) > 0;
    if (!index && !copied)
      continue;  // read as data where it is bound, or a parameter
    std::optional<compiler::value_id> value;
    for (const auto& op : recording.ir.ops)
      if (op.kind == op_kind::graph_input && op.index == int64_t{i})
        value = op.results.at(0);
    std::optional<uint32_t> holder;
    for (const auto& op : recording.ir.ops) {
      if (!value || std::find(op.args.begin(), op.args.end(), *value) == op.args.end())
        continue;
      if (op.node == compiler::no_node || (holder && *holder != op.node))
        return false;
      holder = op.node;
    }
    if (!holder)
      return false;
    auto& held = holders_.emplace_back();  // GCC 12 warns of designated initializers here
    held.input = i;
    held.node = *holder;
    held.copied = copied;
    if (std::find(nodes.begin(), nodes.end(), *holder) == nodes.end())
      nodes.push_back(*holder);
  }
  return nodes.size() <= max_live_holders;
}

bool backward_graph::learn_live_holders(const std::vector<at::Tensor>& live,
                                        const backward_nodes& backward) {
  for (auto& holder : holders_) {
    if (holder.ordinal)
      continue;
    auto held = find_holder(backward, holder.node, live[holder.input]);
    if (!held)
      return false;
    holder.node = held->node;
    holder.ordinal = held->ordinal;
    holder.key = held->key;
    holder.path = path_from_head(backward, holder.node);
    holder.type = &typeid(*backward.nodes[holder.node]);
  }
  // By node (some are the root only now), so that a node holding several
  // inputs is lifted once (read_live_holders, which runs only once they are
  // learnt): resnet18's sweep lifted 12 holders of 5 nodes.
  std::stable_sort(holders_.begin(), holders_.end(),
                   [](const live_holder& a, const live_holder& b) { return a.node < b.node; });
  return true;
}

bool backward_graph::reach_holders(std::vector<torch::autograd::Node*>& head) const {
  for (const auto& holder : holders_) {
    if (holder.node < head.size() && head[holder.node])
      continue;
    if (head.size() < 2 || !head[1] || !holder.path)
      return false;
    torch::autograd::Node* node = head[1];
    for (uint32_t k : *holder.path) {
      const auto& edges = node->next_edges();
      if (k >= edges.size() || !edges[k].function)
        return false;
      node = edges[k].function.get();
    }
    if (typeid(*node) != *holder.type)
      return false;
    if (head.size() <= holder.node)
      head.resize(holder.node + 1, nullptr);
    head[holder.node] = node;
  }
  return true;
}

std::optional<std::vector<copy_span>>
backward_graph::read_live_holders(const backward_nodes& backward) {
  std::vector<std::pair<uint32_t, const void*>> pointed;  // integer inputs, read live
  std::vector<copy_span> copies;
  std::optional<lifted_alone> lifted;
  uint32_t lifted_node = 0;
  for (const auto& holder : holders_) {
    if (!lifted || holder.node != lifted_node) {  // holders_ go by node: each lifted once
      lifted = lift_alone(backward, holder.node);
      lifted_node = holder.node;
    }
    if (!lifted || lifted->key != holder.key || *holder.ordinal >= lifted->tensors.size())
      return std::nullopt;  // that node has another shape: its inputs may not fit the graph
    const auto& tensor = lifted->tensors[*holder.ordinal];
    if (!same_layout(tensor, inputs_[holder.input]))
      return std::nullopt;
    // The node keeps its saved tensor, so the address outlives the launch.
    if (holder.copied) {
      copies.push_back({tensor.const_data_ptr(), inputs_[holder.input].mutable_data_ptr(),
                        span_bytes(tensor)});
      copied_early_from_[holder.input] = tensor.const_data_ptr();
    } else {
      pointed.emplace_back(holder.input, tensor.const_data_ptr());
    }
  }
  if (!pointed.empty()) {
    auto rewrites = bound_.bind_moved(exec_, pointed);
    if (!rewrites)
      return std::nullopt;  // the replay's bind rewrites every node
    graph_cache::instance().counters.rewrites.fetch_add(*rewrites, std::memory_order_relaxed);
  }
  return copies;
}

backward_graph::early_launch::~early_launch() {
  if (turn_)  // neither confirmed nor redone
    graph_cache::instance().counters.early_misses.fetch_add(1, std::memory_order_relaxed);
}

std::optional<backward_graph::early_launch>
backward_graph::launch_early(c10::cuda::CUDAStream stream, const backward_nodes& backward) {
  auto turn = pool_->try_take();
  if (!turn || !launchable_at_frees_ || *launchable_at_frees_ != segment_frees(device_)
      || lent_to_another_thread() || !launches_on(stream))  // the replay path counts these
    return std::nullopt;
  c10::cuda::CUDAGuard device(stream.device_index());
  // A bet before the walk knows the walk's head only.
  bool walked = std::all_of(holders_.begin(), holders_.end(), [&](const live_holder& h) {
    return h.node < backward.nodes.size() && backward.nodes[h.node];
  });
  std::vector<torch::autograd::Node*> reached;
  if (!walked) {
    reached = backward.nodes;
    if (!reach_holders(reached))
      return std::nullopt;
  }
  auto reading = std::chrono::steady_clock::now();
  auto copies = read_live_holders({walked ? backward.nodes : reached, backward.table});
  graph_cache::instance().counters.live_read_ns.fetch_add(
      nanoseconds_between(reading, std::chrono::steady_clock::now()), std::memory_order_relaxed);
  if (!copies)
    return std::nullopt;
  follow_pool(stream, c10::cuda::getCurrentCUDAStream(stream.device_index()));
  batched_copy(*copies, stream.stream());
  launch(stream);
  graph_cache::instance().counters.early_launches.fetch_add(1, std::memory_order_relaxed);
  return early_launch(std::move(turn));
}

void backward_graph::note_addresses(const std::vector<at::Tensor>& live, bool moved,
                                    const backward_nodes& backward) {
  if (moved || !stale_reads_harmless_ || !allocator_counts_frees())
    return;
  if (!learn_live_holders(live, backward)) {
    stale_reads_harmless_ = false;
    return;
  }
  // Memory of the caching allocator carries its deleter.
  auto caching = allocator::get()->raw_deleter();
  for (size_t i = 0; i < live.size(); ++i)
    if (live[i].defined() && (borrowed_[i] || inputs_[i].is_meta())
        && live[i].storage().data_ptr().get_deleter() != caching)
      return;
  launchable_at_frees_ = segment_frees(device_);
}

} // namespace gradd::cuda
