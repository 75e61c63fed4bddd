// reorder_post_acc_grad_hook_nodes: each post-accumulate-grad hook right
// after the accumulate_grad of its leaf, where AccumulateGrad calls it. Hooks
// are visited last to first and inserted right after the accumulation, so
// several hooks of one leaf keep their order (the seed's pass of this name).

#include "compiler/passes/registry.hpp"

namespace gradd::compiler::passes {

namespace {

class reorder_post_acc_grad_hook_nodes_pass final : public pass {
public:
  const char* name() const noexcept override { return "reorder_post_acc_grad_hook_nodes"; }
  bool run(graph& g, analysis_manager& analyses) override {
    statistic_.clear();
    if (is_node_level(g))
      return false;  // see compiler/passes/hook_moves.hpp
    std::vector<uint32_t> order_before;
    for (const auto& o : g.ops)
      order_before.push_back(o.id);
    auto hooks = ids_of(g, op_kind::post_acc_grad_hook);
    for (auto it = hooks.rbegin(); it != hooks.rend(); ++it) {
      auto pos = static_cast<size_t>(position_of(g, *it));
      auto leaf = g.ops[pos].node;
      int64_t acc = -1;
      for (size_t i = 0; i < g.ops.size(); ++i)
        if (g.ops[i].kind == op_kind::accumulate_grad && g.ops[i].node == leaf)
          acc = static_cast<int64_t>(i);
      if (acc < 0)
        throw std::invalid_argument("reorder_post_acc_grad_hook_nodes: op " + std::to_string(pos)
                                    + " (post_acc_grad_hook of node " + std::to_string(leaf)
                                    + ") has no accumulate_grad");
      move_after(g, pos, static_cast<size_t>(acc));
    }
    // Hooks of one leaf pass through each other on the way; count the net
    // change only.
    size_t moved = 0;
    for (size_t i = 0; i < g.ops.size(); ++i)
      moved += g.ops[i].id != order_before[i] ? 1 : 0;
    if (moved > 0)
      analyses.invalidate();
    count_moved(moved);
    return moved > 0;
  }
};

} // namespace

std::unique_ptr<pass> make_reorder_post_acc_grad_hook_nodes() {
  return std::make_unique<reorder_post_acc_grad_hook_nodes_pass>();
}

} // namespace gradd::compiler::passes
