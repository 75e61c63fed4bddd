#pragma once

namespace gradd::engine {

// Note [Concurrent backwards and libtorch's re-entrancy check]
// With a compiled-autograd hook installed, Engine::execute (libtorch 2.11)
// first checks an atomic counter of threads "in compiled autograd", then
// increments it, decrements it again and calls the hook. A second thread
// that reaches the check inside that short window gets NotImplementedError
// ("Re-entrant into Compiled Autograd ..."), although nothing is re-entrant:
// with 8 threads running backwards it happened within 1,600 backwards. The
// stock engine allows concurrent backwards, so gradd must too. gradd makes
// itself the default engine (a subclass whose execute() forwards to the
// stock one) and holds a lock from before that check until its hook starts:
// threads prepare their graph tasks one at a time and run them concurrently.
// It does so when the library loads, before any backward: an engine gets
// CUDA device threads only if it is the first to start them (libtorch starts
// them once per process). Where another default engine is installed already
// (PyTorch's Python engine), gradd leaves it in place, and the `gradd`
// Python package takes the same gate around each Python backward's engine
// call instead (python/gradd/__init__.py).

/// Makes gradd's gated engine the default engine, unless another engine
/// than libtorch's base one is the default. Idempotent; runs at load.
void install_entry_gate();

/// Takes the gate before a backward enters Engine::execute; returns what
/// leave_entry_gate needs. (The gated engine does this; in a Python process,
/// where PyTorch's engine stays the default, the `gradd` package does it
/// around the engine call of every Python backward.)
int enter_entry_gate();

/// After that backward: lets go of the gate unless gradd's hook passed it.
void leave_entry_gate(int depth) noexcept;

/// Called by gradd's hook as it starts: lets the next thread in.
void pass_entry_gate() noexcept;

/// Installs gradd's hook (`on`) or removes it, through the gate: libtorch's
/// switch refuses, and leaves autograd unusable, when a thread is inside the
/// window the gate guards.
void switch_hook(bool on);

} // namespace gradd::engine
