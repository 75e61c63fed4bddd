// reorder_post_hook_nodes: a post hook that sees no outputs (index 0: the
// hook of a node without output gradients, such as AccumulateGrad) runs
// right after the last op that touches its inputs — after the leaf's
// post-accumulate-grad hook when that is the last one (the seed's pass of
// this name). Post hooks with outputs stay where they are: later ops use
// what they return.

#include "compiler/passes/registry.hpp"

#include <algorithm>

namespace gradd::compiler::passes {

namespace {

class reorder_post_hook_nodes_pass final : public pass {
public:
  const char* name() const noexcept override { return "reorder_post_hook_nodes"; }
  bool run(graph& g, analysis_manager& analyses) override {
    statistic_.clear();
    if (is_node_level(g))
      return false;  // see compiler/passes/hook_moves.hpp
    size_t moved = 0;
    auto hooks = ids_of(g, op_kind::post_hook);
    for (auto it = hooks.rbegin(); it != hooks.rend(); ++it) {
      auto pos = static_cast<size_t>(position_of(g, *it));
      if (g.ops[pos].index != 0)
        continue;
      const auto& uses = analyses.uses();
      int64_t last = last_def(uses, g.ops[pos]);
      for (auto v : g.ops[pos].args)
        if (v != no_value)
          for (auto user : uses.users[v])
            if (g.ops[user].kind != op_kind::post_hook)
              last = std::max(last, static_cast<int64_t>(user));
      if (last < 0)
        continue;
      const auto& anchor = g.ops[static_cast<size_t>(last)];
      if (anchor.kind == op_kind::accumulate_grad)
        for (size_t i = static_cast<size_t>(last) + 1; i < g.ops.size(); ++i)
          if (g.ops[i].kind == op_kind::post_acc_grad_hook && g.ops[i].node == anchor.node)
            last = static_cast<int64_t>(i);
      if (static_cast<size_t>(last) + 1 == pos || static_cast<size_t>(last) == pos)
        continue;
      move_after(g, pos, static_cast<size_t>(last));
      analyses.invalidate();
      ++moved;
    }
    count_moved(moved);
    return moved > 0;
  }
};

} // namespace

std::unique_ptr<pass> make_reorder_post_hook_nodes() {
  return std::make_unique<reorder_post_hook_nodes_pass>();
}

} // namespace gradd::compiler::passes
