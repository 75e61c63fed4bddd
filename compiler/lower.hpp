#pragma once

#include "compiler/ir.hpp"

#include <string>

namespace gradd::compiler {

/// Returns "" when `g`'s node table is one lower_to_node_ops may take (a
/// table captured here always is), else what is wrong: an edge to the root
/// or past the table, or an edge or capture past its node's inputs or the
/// graph's outputs. The daemon checks tables from its clients with it.
std::string check_node_table(const graph& g);

/// Builds the node-level program of `g` from its node table: one call per
/// node in the stock engine's order (Note [Stock engine order]), with its
/// hooks, output validation, the gradient sums in arrival order, the
/// captured outputs and the final callbacks. Replaces `g.ops`.
void lower_to_node_ops(graph& g);

} // namespace gradd::compiler
