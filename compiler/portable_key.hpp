#pragma once

// A structure's key that means the same in every process: what a plan kept
// on disk (cache.dir) is filed under. The hit path's structural key holds
// type_info addresses, which differ from process to process; this one is
// computed from the captured node table (type names, edges, captures, hook
// counts), on a miss only.

#include "compiler/ir.hpp"

#include <cstdint>

namespace gradd::compiler {

/// The key of node table `g` (sizes and sequence numbers left out, as the
/// structural key leaves them out, and which nodes run, which lowering
/// derives from the rest) under the plan variant `variant` (Note [Policy
/// changes and cached plans]).
uint64_t portable_key(const graph& g, uint64_t variant);

/// Whether `a` and `b` are the same structure as portable_key sees it (a
/// stored plan is used only then, whatever its file name says).
bool same_structure(const graph& a, const graph& b);

} // namespace gradd::compiler
