#pragma once

// For an interpreter that keeps its own autograd engine as the process's
// default one, as PyTorch's Python engine does in a Python process: the
// gate it takes around each backward's call into that engine, so that
// backwards of several threads reach gradd's hook one at a time (Note
// [Concurrent backwards and libtorch's re-entrancy check],
// engine/entry_gate.hpp). A C++ program needs none of this: gradd's own
// engine takes the gate.

namespace gradd {

/// Takes the gate before a backward enters Engine::execute; returns what
/// leave_backward_gate needs.
int enter_backward_gate();

/// After that backward: lets go of the gate unless gradd's hook passed it.
void leave_backward_gate(int depth) noexcept;

} // namespace gradd
