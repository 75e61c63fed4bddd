// A plan from elsewhere (see foreign_plan.hpp). The checks run cheapest
// first; each one makes the next safe to run: the node table bounds the
// edges build_plan follows, and verify bounds the values it reads.

#include "compiler/foreign_plan.hpp"

#include "compiler/exec_info.hpp"
#include "compiler/portable_key.hpp"

#include <algorithm>
#include <sstream>
#include <vector>

namespace gradd::compiler {

namespace {

/// Renumbers `g`'s values 1, 2, ... in their order, so that its value
/// count is what its ops use, however large the ids read were.
void renumber_values(graph& g) {
  std::vector<value_id> ids;
  for (const auto& o : g.ops) {
    ids.insert(ids.end(), o.args.begin(), o.args.end());
    ids.insert(ids.end(), o.results.begin(), o.results.end());
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  ids.erase(std::remove(ids.begin(), ids.end(), no_value), ids.end());
  auto dense = [&](value_id v) {
    return v == no_value ? no_value
                         : static_cast<value_id>(
                               std::lower_bound(ids.begin(), ids.end(), v) - ids.begin() + 1);
  };
  for (auto& o : g.ops) {
    for (auto& v : o.args)
      v = dense(v);
    for (auto& v : o.results)
      v = dense(v);
  }
  g.num_values = static_cast<uint32_t>(ids.size() + 1);
}

/// Whether every op's kinds are ones this build knows: an enum read from
/// bytes may hold any value.
bool known_kinds(const graph& g) {
  return std::all_of(g.ops.begin(), g.ops.end(), [](const op& o) {
    return o.kind <= op_kind::output && o.input <= input_kind::packed;
  });
}

/// What of a node a plan's schedule reads beyond its structure: which
/// nodes run (as lowering marks them in `table`) and their input counts.
bool same_schedule_inputs(const graph& ir, const graph& table) {
  auto lowered = table;
  mark_needed_nodes(lowered);
  for (size_t i = 0; i < ir.nodes.size(); ++i)
    if (ir.nodes[i].needed != lowered.nodes[i].needed
        || ir.nodes[i].inputs.size() != lowered.nodes[i].inputs.size())
      return false;
  return true;
}

} // namespace

std::string check_foreign_plan(graph& ir, const plan& p, const graph& table) noexcept {
  try {
    if (!same_structure(ir, table) || !same_schedule_inputs(ir, table))
      return "its graph is not this structure";
    if (!known_kinds(ir))
      return "its graph has ops of unknown kinds";
    if (!is_node_level(ir))
      return "its graph is not node-level IR";
    renumber_values(ir);
    std::ostringstream why;
    if (verify(ir, &why))
      return "its graph does not verify: " + why.str();
    if (p != build_plan(ir))
      return "its plan is not the one its graph compiles to";
    if (!sequence_order_holds(p, table))
      return "it was compiled for another order of sequence numbers";
    return {};
  } catch (const std::exception& e) {
    return std::string("it cannot be checked: ") + e.what();
  }
}

} // namespace gradd::compiler
