#pragma once

#include "compiler/ir.hpp"

#include <vector>

namespace gradd::compiler {

/// Returns the nodes of `g` that take part in the backward, in the order the
/// stock engine evaluates them on one ready queue.
///
/// Note [Stock engine order]
/// The stock engine keeps a priority queue of ready nodes and always takes the
/// one with the highest `sequence_nr` (AccumulateGrad nodes have the highest
/// possible one). The order in which gradients reach a node's input decides
/// the order of its gradient sum, and floating-point sums are not
/// associative: only this order gives the stock engine's gradients bitwise.
/// The simulation uses the same container, comparison and push order, so ties
/// break the same way too. Nodes that only capture (`autograd::grad` inputs
/// that need not run) are part of the order; nodes that should not execute
/// are not. Requires `mark_needed_nodes` first.
std::vector<uint32_t> stock_order(const graph& g);

} // namespace gradd::compiler
