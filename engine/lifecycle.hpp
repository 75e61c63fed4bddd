#pragma once

// Which mode gradd is in, and how enable/disable and the guards change it.
//
// A mode is three things: whether libtorch's hook sends backwards to gradd,
// whether a compile pipeline runs, and the settings both use. enable() and
// disable() set the mode of the innermost scope; a guard opens a scope with
// a mode of its own and, when it ends, removes that scope and applies the
// mode of the innermost scope still open. Scopes may end in any order
// (guards on several threads), and whatever the order, the mode once all
// guards have ended is the one set outside them.

#include "gradd/settings.hpp"

#include <cstdint>
#include <functional>
#include <memory>

namespace gradd::engine {

struct engine_mode {
  bool hooked = false;     ///< gradd serves backwards
  bool compiling = false;  ///< a pipeline compiles new graphs
  std::shared_ptr<const settings> config = std::make_shared<const settings>();
};

/// Whether gradd's hook is installed now. Lock-free.
bool hook_installed() noexcept;

/// Changes the innermost scope's mode with `change` and applies it, in one
/// step: no other mode change comes between. Thread-safe.
void change_mode(const std::function<void(engine_mode&)>& change);

/// Opens a scope whose mode `derive` makes from the innermost one, in one
/// step, and applies it; returns the token that closes it. Thread-safe.
uint64_t open_scope(const std::function<engine_mode(const engine_mode&)>& derive);

/// Closes the scope `token` opened, and applies the innermost open one.
void close_scope(uint64_t token);

} // namespace gradd::engine
