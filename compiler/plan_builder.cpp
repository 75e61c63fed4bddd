// From node-level IR to a plan.
//
// The step order is the order in which the ops first mention each node (a
// call, an accumulate_grad or a captured input); the passes decide it, the
// builder only follows it. Each output edge of a node becomes a route to the
// step of its target, or is dropped when the target does not execute. Slots
// need no explicit frees: a step moves its input buffer out when it runs, so
// every slot is released at its last use.

#include "compiler/plan.hpp"

#include "compiler/exec_info.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace gradd::compiler {

plan build_plan(const graph& g) {
  std::ostringstream why;
  if (verify(g, &why))
    throw std::invalid_argument("gradd: cannot compile a broken graph: " + why.str());
  plan p;
  p.num_nodes = static_cast<uint32_t>(g.nodes.size());
  p.num_outputs = g.num_outputs;
  std::vector<uint32_t> step_of(g.nodes.size(), no_step);
  auto schedule = [&](uint32_t node) {
    if (node == no_node || step_of[node] != no_step)
      return;
    step_of[node] = static_cast<uint32_t>(p.steps.size());
    p.steps.push_back({node, g.nodes[node].needed, 0, 0, 0, 0});
  };
  for (const auto& o : g.ops)
    if (o.kind == op_kind::call_node || o.kind == op_kind::accumulate_grad || is_hook(o.kind))
      schedule(o.node);
  // Capture-only nodes without hooks have no op of their own.
  for (uint32_t i = 0; i < g.nodes.size(); ++i)
    if (!g.nodes[i].captures.empty() && step_of[i] == no_step)
      schedule(i);
  for (auto& s : p.steps) {
    const auto& n = g.nodes[s.node];
    s.first_capture = static_cast<uint32_t>(p.captures.size());
    s.capture_count = static_cast<uint32_t>(n.captures.size());
    p.captures.insert(p.captures.end(), n.captures.begin(), n.captures.end());
    if (!s.runs)
      continue;
    s.first_route = static_cast<uint32_t>(p.routes.size());
    s.route_count = static_cast<uint32_t>(n.edges.size());
    for (const auto& e : n.edges) {
      bool live = e.target != no_node && should_execute(g.nodes[e.target]);
      p.routes.push_back(live ? route{step_of[e.target], e.input_nr} : route{});
    }
  }
  for (uint32_t i = 0; i < g.nodes.size(); ++i)
    if (!g.nodes[i].is_root && !g.nodes[i].is_accumulate_grad && step_of[i] != no_step)
      p.sequence_order.push_back(i);
  std::stable_sort(p.sequence_order.begin(), p.sequence_order.end(),
                   [&](uint32_t a, uint32_t b) {
                     return g.nodes[a].sequence_nr < g.nodes[b].sequence_nr;
                   });
  return p;
}

bool sequence_order_holds(const plan& p, const graph& g) noexcept {
  uint64_t previous = 0;
  for (auto i : p.sequence_order) {
    if (i >= g.nodes.size() || g.nodes[i].sequence_nr < previous)
      return false;
    previous = g.nodes[i].sequence_nr;
  }
  return true;
}

std::string to_string(const plan& p) {
  std::ostringstream out;
  out << "plan(steps=" << p.steps.size() << ", routes=" << p.routes.size()
      << ", outputs=" << p.num_outputs << ")";
  return out.str();
}

} // namespace gradd::compiler
