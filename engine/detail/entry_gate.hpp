#pragma once

namespace gradd::engine::detail {

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
// (PyTorch's Python engine), gradd leaves it in place.

/// Makes gradd's gated engine the default engine, unless another engine
/// than libtorch's base one is the default. Idempotent; runs at load.
void install_entry_gate();

/// Called by gradd's hook as it starts: lets the next thread in.
void pass_entry_gate() noexcept;

/// Installs gradd's hook (`on`) or removes it, through the gate: libtorch's
/// switch refuses, and leaves autograd unusable, when a thread is inside the
/// window the gate guards.
void switch_hook(bool on);

} // namespace gradd::engine::detail
