#pragma once

// Whether a plan that did not come from this process's own compile may
// serve: a plan read from a file in cache.dir or sent by a daemon. Its bytes
// may be corrupted or forged, and a plan runs live autograd nodes by index,
// so it is used only when it is exactly what this process would have built
// from its IR, and that IR is a well-formed graph of the same structure as
// the node table captured here.

#include "compiler/ir.hpp"
#include "compiler/plan.hpp"

#include <string>

namespace gradd::compiler {

/// Checks `ir` and `p`, read from elsewhere, against `table`, this
/// process's capture of the same structure. Returns "" when the plan may
/// serve, else why not. Renumbers `ir`'s values densely first, so that no
/// forged id or count sizes an allocation. Never throws.
std::string check_foreign_plan(graph& ir, const plan& p, const graph& table) noexcept;

} // namespace gradd::compiler
