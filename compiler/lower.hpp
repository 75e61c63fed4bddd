#pragma once

#include "compiler/ir.hpp"

namespace gradd::compiler {

/// Builds the node-level program of `g` from its node table: one call per
/// node in the stock engine's order (Note [Stock engine order]), with its
/// hooks, output validation, the gradient sums in arrival order, the
/// captured outputs and the final callbacks. Replaces `g.ops`.
void lower_to_node_ops(graph& g);

} // namespace gradd::compiler
