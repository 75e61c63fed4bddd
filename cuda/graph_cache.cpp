// The process's CUDA graphs (see graph_cache.hpp).
//
// Note [Published graphs]
// Every backward of a structure with graphs looks its shape up; the stream
// actor adds a graph now and then, and evicts. Under one mutex, a hit
// waited whenever the actor published, and the lock cost each hit an
// exchange with whatever thread last held it. So the hit path reads an
// immutable table instead: the structure's graphs by shape, by probe key,
// and whether it stays on plans, loaded with one atomic load of a
// shared_ptr (libstdc++ guards the count with a bit of the pointer, held
// for the increment only). Whoever changes what the table shows (a
// capture published, evictions, a graph dropped, a probe learnt, the
// structure kept on plans) does so under the mutex and publishes a new
// table before letting go; a hit holding the old one keeps its graph alive
// till its replay ends, as a graph taken out under the lock did. What a
// hit writes needs no table: the shape history a bet reads (`last_shape`,
// `steady`) and the graphs' last use (`clock`, backward_graph::mark_used)
// are atomics. A miss, a shape without a graph, takes the mutex: it runs on
// its plan anyway, and the policy's counts (`seen`) and the slot of a
// capture in flight live there.

#include "cuda/graph_cache.hpp"

namespace gradd::cuda {

structure_graphs::structure_graphs()
    : published_(std::make_shared<const published_graphs>()) {}

void structure_graphs::publish() {
  auto table = std::make_shared<published_graphs>();
  table->plan_only = !plan_only.empty();
  size_t unprobed = 0;
  for (const auto& [shape, slot] : shapes)
    if (slot.graph) {
      table->shapes.emplace(shape, published_shape{slot.graph, slot.probed});
      unprobed += !slot.probed;
    }
  for (const auto& [probe, shape] : probed_shapes)
    if (shape)
      if (auto it = table->shapes.find(*shape); it != table->shapes.end())
        table->probed.emplace(probe, it->second.graph);
  table->bets_by_probe = !probe_fails && unprobed == 0 && table->shapes.size() > 1;
  published_.store(std::move(table), std::memory_order_release);
}

std::vector<std::shared_ptr<backward_graph>> structure_graphs::evict_beyond(uint32_t max_graphs) {
  std::vector<std::shared_ptr<backward_graph>> evicted;
  while (shapes.size() > max_graphs) {
    auto oldest = shapes.end();
    for (auto it = shapes.begin(); it != shapes.end(); ++it)
      if (it->second.graph
          && (oldest == shapes.end()
              || it->second.graph->last_used() < oldest->second.graph->last_used()))
        oldest = it;
    if (oldest == shapes.end())
      break;  // all being captured
    evicted.push_back(std::move(oldest->second.graph));
    shapes.erase(oldest);
  }
  return evicted;
}

void structure_graphs::learn_probe(uint64_t shape, std::optional<uint64_t> probe) {
  if (auto slot = shapes.find(shape); slot != shapes.end())
    slot->second.probed = true;
  if (!probe) {
    probe_fails = true;
    return;
  }
  auto [it, first] = probed_shapes.emplace(*probe, shape);
  if (!first && it->second != shape)
    it->second.reset();  // this probe cannot tell the two apart
}

void graph_counters::reset() noexcept {
  graph_backwards = 0;
  piecewise_backwards = 0;
  eager_rests = 0;
  captures = 0;
  capture_failures = 0;
  evictions = 0;
  copy_on_writes = 0;
  lent_elsewhere = 0;
  other_stream = 0;
  during_capture = 0;
  recordings = 0;
  rewrites = 0;
  early_launches = 0;
  early_misses = 0;
  bets_before_engine = 0;
  hits_before_engine = 0;
  bets_before_walk = 0;
  walk_ns = 0;
  lift_ns = 0;
  copy_ns = 0;
  launch_ns = 0;
  cuda_launch_ns = 0;
  live_read_ns = 0;
  hand_out_ns = 0;
}

graph_cache& graph_cache::instance() {
  static auto* cache = new graph_cache();
  return *cache;
}

std::shared_ptr<structure_graphs> graph_cache::find(uint64_t id) {
  std::shared_lock lock(mutex_);
  auto it = structures_.find(id);
  return it != structures_.end() ? it->second : nullptr;
}

std::shared_ptr<structure_graphs> graph_cache::structure(uint64_t id) {
  {
    std::shared_lock lock(mutex_);
    if (auto it = structures_.find(id); it != structures_.end())
      return it->second;
  }
  std::unique_lock lock(mutex_);
  auto& slot = structures_[id];
  if (!slot)
    slot = std::make_shared<structure_graphs>();
  return slot;
}

void graph_cache::clear() {
  std::unordered_map<uint64_t, std::shared_ptr<structure_graphs>> dropped;
  {
    std::unique_lock lock(mutex_);
    dropped.swap(structures_);
  }
  // Graphs go outside the lock: each waits for its last replay.
}

} // namespace gradd::cuda
