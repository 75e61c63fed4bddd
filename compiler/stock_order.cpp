// Simulation of the stock engine's ready queue over a captured node table.
// See Note [Stock engine order] in stock_order.hpp.

#include "compiler/stock_order.hpp"

#include "compiler/exec_info.hpp"

#include <queue>

namespace gradd::compiler {

namespace {

struct ready_entry {
  uint64_t sequence_nr;
  uint32_t node;
};

// The stock engine's CompareNodeTaskTime for tasks of one reentrant depth.
struct lower_sequence_nr {
  bool operator()(const ready_entry& a, const ready_entry& b) const noexcept {
    return a.sequence_nr < b.sequence_nr;
  }
};

} // namespace

std::vector<uint32_t> stock_order(const graph& g) {
  std::vector<uint32_t> order;
  if (g.nodes.empty())
    return order;
  std::vector<uint32_t> dependencies(g.nodes.size(), 0);
  for (const auto& n : g.nodes)
    for (const auto& e : n.edges)
      if (e.target != no_node)
        ++dependencies[e.target];
  std::vector<bool> has_buffer(g.nodes.size(), false);
  std::priority_queue<ready_entry, std::vector<ready_entry>, lower_sequence_nr> ready;
  ready.push({g.nodes[0].sequence_nr, 0});
  order.reserve(g.nodes.size());
  while (!ready.empty()) {
    auto id = ready.top().node;
    ready.pop();
    order.push_back(id);
    const auto& n = g.nodes[id];
    if (!n.needed)
      continue; // only captures: its gradients go no further
    for (const auto& e : n.edges) {
      if (e.target == no_node)
        continue;
      bool is_ready = --dependencies[e.target] == 0;
      if (!has_buffer[e.target]) {
        if (!should_execute(g.nodes[e.target]))
          continue;
        has_buffer[e.target] = true;
      }
      if (is_ready)
        ready.push({g.nodes[e.target].sequence_nr, e.target});
    }
  }
  return order;
}

} // namespace gradd::compiler
