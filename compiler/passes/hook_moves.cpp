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
    auto def = last_def(analyses.uses(), g.ops[pos]);
    if (def < 0 || g.ops[static_cast<size_t>(def)].kind == op_kind::graph_input
        || static_cast<size_t>(def) + 1 == pos)
      continue;
    move_after(g, pos, static_cast<size_t>(def));
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
    auto user = first_user(analyses.uses(), g.ops[pos]);
    if (user < 0 || static_cast<size_t>(user) == pos + 1)
      continue;
    move_before(g, pos, static_cast<size_t>(user));
    analyses.invalidate();
    ++moved;
  }
  count_moved(moved);
  return moved > 0;
}

} // namespace gradd::compiler::passes
