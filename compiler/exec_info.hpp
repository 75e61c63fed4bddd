#pragma once

#include "compiler/ir.hpp"

namespace gradd::compiler {

/// Marks which nodes of `g` run, as the stock engine's `exec_info` does.
///
/// A plain `backward()` runs every node. With `inputs` (`autograd::grad`, or
/// `backward(inputs=...)`) only nodes on a path to an input run: a node runs
/// when one of its successors runs or has a capture. Nodes the capture marked
/// as `needed` (the inputs of `backward(inputs=...)`) and the root always run.
void mark_needed_nodes(graph& g);

/// Whether node `n` takes part in the backward at all (runs or captures).
inline bool should_execute(const node_info& n) noexcept {
  return n.needed || !n.captures.empty();
}

} // namespace gradd::compiler
