// Which nodes of a filtered backward run.
//
// The stock engine (GraphTask::init_to_execute) walks the graph depth-first
// from the root and marks a node needed when any successor should execute,
// i.e. is needed or captures a gradient. Here the same fixed point is reached
// with an iterative post-order walk over the captured node table; `needed`
// flags set by the capture (root, inputs of backward(inputs=...)) stay set.

#include "compiler/exec_info.hpp"

namespace gradd::compiler {

void mark_needed_nodes(graph& g) {
  if (!g.exec_filter) {
    for (auto& n : g.nodes)
      n.needed = true;
    return;
  }
  enum class state : uint8_t { unseen, open, done };
  std::vector<state> seen(g.nodes.size(), state::unseen);
  struct frame {
    uint32_t node;
    uint32_t next_edge;
  };
  std::vector<frame> stack;
  if (g.nodes.empty())
    return;
  stack.push_back({0, 0});
  seen[0] = state::open;
  while (!stack.empty()) {
    auto& top = stack.back();
    auto& n = g.nodes[top.node];
    if (top.next_edge < n.edges.size()) {
      auto child = n.edges[top.next_edge++].target;
      if (child == no_node)
        continue;
      if (seen[child] == state::unseen) {
        seen[child] = state::open;
        stack.push_back({child, 0});
      } else if (should_execute(g.nodes[child])) {
        n.needed = true;
      }
      continue;
    }
    seen[top.node] = state::done;
    bool executes = should_execute(n);
    stack.pop_back();
    if (executes && !stack.empty())
      g.nodes[stack.back().node].needed = true;
  }
}

} // namespace gradd::compiler
