// The two moves most of the seed's reordering passes are made of.

#include "compiler/passes/hook_moves.hpp"

#include <algorithm>

namespace gradd::compiler::passes {

bool move_after_input_pass::run(graph& g, analysis_manager& analyses) {
  statistic_.clear();
  if (is_node_level(g))
    return false;
  size_t moved = 0;
  for (auto id : ids_of(g, kind_)) {
    auto pos = static_cast<size_t>(position_of(g, id));
    const auto& uses = analyses.uses();
    auto def = last_def(uses, g.ops[pos]);
    if (def < 0 || g.ops[static_cast<size_t>(def)].kind == op_kind::graph_input)
      continue;
    // Not past another use of its args: AccumulateGrad steals a gradient
    // only while nothing else holds it, and a hook may change it in place.
    auto anchor = static_cast<size_t>(last_touch_before(uses, g.ops[pos], pos));
    if (anchor + 1 == pos)
      continue;
    move_after(g, pos, anchor);
    analyses.invalidate();
    ++moved;
  }
  count_moved(moved);
  return moved > 0;
}

bool move_before_user_pass::run(graph& g, analysis_manager& analyses) {
  statistic_.clear();
  if (is_node_level(g))
    return false;
  size_t moved = 0;
  auto ids = ids_of(g, kind_);
  if (reverse_)
    std::reverse(ids.begin(), ids.end());
  for (auto id : ids) {
    auto pos = static_cast<size_t>(position_of(g, id));
    const auto& uses = analyses.uses();
    auto user = first_user(uses, g.ops[pos]);
    if (user < 0)
      continue;
    // Not past another use of its args (see move_after_input_pass).
    auto other_use = first_use_after(uses, g.ops[pos], pos);
    auto anchor = static_cast<size_t>(other_use >= 0 ? std::min(user, other_use) : user);
    if (anchor == pos + 1)
      continue;
    move_before(g, pos, anchor);
    analyses.invalidate();
    ++moved;
  }
  count_moved(moved);
  return moved > 0;
}

} // namespace gradd::compiler::passes
