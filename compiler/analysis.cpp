// Use-def chains and op moves.

#include "compiler/analysis.hpp"

#include <algorithm>

namespace gradd::compiler {

use_def::use_def(const graph& g) : def(g.num_values, -1), users(g.num_values) {
  for (size_t i = 0; i < g.ops.size(); ++i) {
    for (auto v : g.ops[i].results)
      if (v != no_value && v < g.num_values)
        def[v] = static_cast<int64_t>(i);
    for (auto v : g.ops[i].args)
      if (v != no_value && v < g.num_values)
        if (users[v].empty() || users[v].back() != i)
          users[v].push_back(static_cast<uint32_t>(i));
  }
}

bool use_def::has_users(const graph& g, size_t position) const {
  for (auto v : g.ops[position].results)
    if (v != no_value && !users[v].empty())
      return true;
  return false;
}

int64_t use_def::last_touch_before(value_id v, size_t position) const {
  if (v == no_value || v >= users.size())
    return -1;
  const auto& uses = users[v];
  auto after = std::lower_bound(uses.begin(), uses.end(), position);
  int64_t last = after == uses.begin() ? -1 : int64_t{*std::prev(after)};
  return def[v] < static_cast<int64_t>(position) ? std::max(last, def[v]) : last;
}

int64_t use_def::first_use_after(value_id v, size_t position) const {
  if (v == no_value || v >= users.size())
    return -1;
  const auto& uses = users[v];
  auto after = std::upper_bound(uses.begin(), uses.end(), position);
  return after == uses.end() ? -1 : int64_t{*after};
}

std::vector<uint32_t> ids_of(const graph& g, op_kind kind) {
  std::vector<uint32_t> ids;
  for (const auto& o : g.ops)
    if (o.kind == kind)
      ids.push_back(o.id);
  return ids;
}

int64_t last_def(const use_def& uses, const op& o) {
  int64_t last = -1;
  for (auto v : o.args)
    if (v != no_value && v < uses.def.size())
      last = std::max(last, uses.def[v]);
  return last;
}

int64_t first_user(const use_def& uses, const op& o) {
  int64_t first = -1;
  for (auto v : o.results)
    if (v != no_value && v < uses.users.size() && !uses.users[v].empty()) {
      auto user = static_cast<int64_t>(uses.users[v].front());
      first = first < 0 ? user : std::min(first, user);
    }
  return first;
}

int64_t last_touch_before(const use_def& uses, const op& o, size_t position) {
  int64_t last = -1;
  for (auto v : o.args)
    last = std::max(last, uses.last_touch_before(v, position));
  return last;
}

int64_t first_use_after(const use_def& uses, const op& o, size_t position) {
  int64_t first = -1;
  for (auto v : o.args) {
    auto use = uses.first_use_after(v, position);
    if (use >= 0)
      first = first < 0 ? use : std::min(first, use);
  }
  return first;
}

int64_t position_of(const graph& g, uint32_t id) {
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (g.ops[i].id == id)
      return static_cast<int64_t>(i);
  return -1;
}

void move_after(graph& g, size_t from, size_t anchor) {
  if (from == anchor + 1 || from == anchor)
    return;
  auto moved = std::move(g.ops[from]);
  g.ops.erase(g.ops.begin() + static_cast<std::ptrdiff_t>(from));
  if (from < anchor)
    --anchor;
  g.ops.insert(g.ops.begin() + static_cast<std::ptrdiff_t>(anchor + 1), std::move(moved));
}

void move_before(graph& g, size_t from, size_t anchor) {
  if (from + 1 == anchor || from == anchor)
    return;
  auto moved = std::move(g.ops[from]);
  g.ops.erase(g.ops.begin() + static_cast<std::ptrdiff_t>(from));
  if (from < anchor)
    --anchor;
  g.ops.insert(g.ops.begin() + static_cast<std::ptrdiff_t>(anchor), std::move(moved));
}

} // namespace gradd::compiler
