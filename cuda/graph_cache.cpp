// The process's CUDA graphs (see graph_cache.hpp).

#include "cuda/graph_cache.hpp"

namespace gradd::cuda {

std::vector<std::shared_ptr<backward_graph>> structure_graphs::evict_beyond(uint32_t max_graphs) {
  std::vector<std::shared_ptr<backward_graph>> evicted;
  while (shapes.size() > max_graphs) {
    auto oldest = shapes.end();
    for (auto it = shapes.begin(); it != shapes.end(); ++it)
      if (it->second.graph && (oldest == shapes.end()
                               || it->second.last_used < oldest->second.last_used))
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

bool structure_graphs::bets_by_probe() const {
  if (probe_fails)
    return false;
  size_t graphs = 0;
  for (const auto& [shape, slot] : shapes) {
    if (slot.graph && !slot.probed)
      return false;
    graphs += slot.graph != nullptr;
  }
  return graphs > 1;
}

std::shared_ptr<backward_graph> structure_graphs::graph_probed(uint64_t probe) const {
  auto named = probed_shapes.find(probe);
  if (named == probed_shapes.end() || !named->second)
    return nullptr;
  auto slot = shapes.find(*named->second);
  return slot != shapes.end() ? slot->second.graph : nullptr;
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
