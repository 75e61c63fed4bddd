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

#include "config/settings.hpp"

#include <cstdint>
#include <memory>

namespace gradd::engine::detail {

struct engine_mode {
  bool hooked = false;     ///< gradd serves backwards
  bool compiling = false;  ///< a pipeline compiles new graphs
  std::shared_ptr<const settings> config = std::make_shared<const settings>();
};

/// The mode now (the innermost scope's). Thread-safe.
engine_mode current_mode();

/// Whether gradd's hook is installed now. Lock-free.
bool hook_installed() noexcept;

/// Sets the innermost scope's mode and applies it. Thread-safe.
void set_mode(engine_mode mode);

/// Opens a scope in `mode`; returns the token that closes it.
uint64_t open_scope(engine_mode mode);

/// Closes the scope `token` opened, and applies the innermost open one.
void close_scope(uint64_t token);

} // namespace gradd::engine::detail
