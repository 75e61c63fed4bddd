#pragma once

// A structure's key that means the same in every process: what a plan kept
// on disk (cache.dir) is filed under. The hit path's structural key holds
// type_info addresses, which differ from process to process; this one is
// computed from the captured node table (type names, edges, captures, hook
// counts), on a miss only.

#include "compiler/ir.hpp"

#include <cstdint>
#include <string>

namespace gradd::compiler {

/// The plan variant of the pass pipeline `effective_pipeline`
/// (settings::passes_section::effective_pipeline()): plans compiled under
/// other passes are other variants.
uint64_t plan_variant(const std::string& effective_pipeline);

/// The key of node table `g` (sizes and sequence numbers left out, as the
/// structural key leaves them out, and which nodes run, which lowering
/// derives from the rest) under the plan variant `variant` (Note [Policy
/// changes and cached plans]).
uint64_t portable_key(const graph& g, uint64_t variant);

/// A key of the order of `g`'s sequence numbers (the permutation, not the
/// numbers), which a plan's schedule depends on and portable_key leaves out:
/// processes running the same code agree on it.
uint64_t sequence_order_key(const graph& g);

/// The key a daemon files `g`'s plan under in its cache.dir: one file per
/// structure and sequence order, which every rank of a machine can read.
uint64_t shared_plan_key(const graph& g, uint64_t variant);

/// Whether `a` and `b` are the same structure as portable_key sees it (a
/// stored plan is used only then, whatever its file name says).
bool same_structure(const graph& a, const graph& b);

} // namespace gradd::compiler
