"""gradd: an asynchronous backward engine for PyTorch, in a Python process.

Once enabled, gradd serves the process's backwards (``loss.backward()``,
``torch.autograd.grad``) through PyTorch's compiled-autograd hook: a new
graph structure runs on the stock engine while gradd compiles a plan for it
in the background, later ones run that plan, with gradients bitwise equal
to the stock engine's. Policies are YAML files (see the README's "Policy").

Python ``autograd.Function``s and hooks (tensor, module, post-accumulate-
grad) run from plans like built-in nodes, each taking the GIL when called;
what gradd cannot run goes to the stock engine, counted in
``stats()["eager_by_reason"]``. ``python3 -m gradd.bench`` is the benchmark.
"""

import contextlib
import sys
from typing import Iterator, Optional

import torch  # noqa: F401  (loads libtorch before gradd's native part)

from . import _native

config_error = _native.config_error
"""Raised for a policy gradd cannot use; the message names file, line and key."""


# PyTorch's compiled autograd and gradd install the same engine hook
# (Engine::set_compiled_autograd), and each removes it when it stops: with
# both on, one would silently switch the other off. So each refuses to start
# while the other runs.


def _refuse_under_compiled_autograd() -> None:
    ca = sys.modules.get("torch._dynamo.compiled_autograd")
    if ca is not None and getattr(ca, "compiled_autograd_enabled", False):
        raise RuntimeError(
            "gradd: PyTorch's compiled autograd is active in this process; it and "
            "gradd use the same engine hook, so gradd cannot be enabled inside it")


def _guard_compiled_autograd_setter() -> None:
    module = torch._C._dynamo.compiled_autograd
    setter = module.set_autograd_compiler
    if getattr(setter, "_gradd_guard", False):
        return

    def set_autograd_compiler(compiler, *args, **kwargs):
        if compiler is not None and _native.is_enabled():
            raise RuntimeError(
                "gradd is enabled in this process; PyTorch's compiled autograd uses "
                "the same engine hook, so it cannot start while gradd serves backwards")
        return setter(compiler, *args, **kwargs)

    set_autograd_compiler._gradd_guard = True
    module.set_autograd_compiler = set_autograd_compiler


_guard_compiled_autograd_setter()


# Note [Concurrent backwards and libtorch's re-entrancy check]
# (engine/entry_gate.hpp): libtorch's compiled-autograd entry throws
# when two threads pass it at once. In C++ gradd's default engine holds a
# gate across it; here PyTorch's engine stays the default, so every Python
# backward takes that gate around its engine call, and gradd's hook lets
# it go as soon as it starts: backwards still run concurrently.
def _gate_python_backwards() -> None:
    import torch.autograd.graph as graph

    run_backward = graph._engine_run_backward
    if getattr(run_backward, "_gradd_gate", False):
        return

    def _engine_run_backward(*args, **kwargs):
        if not _native.is_enabled():
            return run_backward(*args, **kwargs)
        depth = _native.enter_gate()
        try:
            return run_backward(*args, **kwargs)
        finally:
            _native.leave_gate(depth)

    _engine_run_backward._gradd_gate = True
    graph._engine_run_backward = _engine_run_backward
    torch.autograd._engine_run_backward = _engine_run_backward


_gate_python_backwards()


# Note [Device synchronizes during captures] (cuda/capture_gate.hpp): a
# device-wide synchronize while gradd captures a CUDA graph on its own
# thread would fail and spoil that capture. torch.cuda.synchronize, here,
# waits for the capture in flight first (a few milliseconds at most).
def _gate_device_synchronize() -> None:
    synchronize = torch.cuda.synchronize
    if getattr(synchronize, "_gradd_gate", False):
        return

    def _synchronize(device=None) -> None:
        torch.cuda._lazy_init()
        with torch.cuda.device(device):
            _native.synchronize_device()

    _synchronize.__doc__ = synchronize.__doc__
    _synchronize._gradd_gate = True
    torch.cuda.synchronize = _synchronize


_gate_device_synchronize()


def enable(config: Optional[str] = None) -> None:
    """Serves the process's backwards with gradd, under the policy file
    ``config`` (default: ``$GRADD_CONFIG``, else the defaults). Inside an
    ``enabled()`` or ``disabled()`` scope, changes that scope's mode.
    Refused (RuntimeError) while PyTorch's compiled autograd is active."""
    _refuse_under_compiled_autograd()
    _native.enable(config)


def disable() -> None:
    """Leaves later backwards to the stock engine; stops the compiles."""
    _native.disable()


def is_enabled() -> bool:
    """Whether gradd serves backwards now."""
    return _native.is_enabled()


@contextlib.contextmanager
def enabled(config: Optional[str] = None) -> Iterator[None]:
    """gradd on for a ``with`` block; the enclosing mode comes back after it.
    Scopes nest like PyTorch's compiled_autograd ``_enable``."""
    _refuse_under_compiled_autograd()
    scope = _native.EnableScope(config)
    try:
        yield
    finally:
        scope.close()


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """gradd off for a ``with`` block (its compiles keep running); the
    enclosing mode comes back after it."""
    scope = _native.DisableScope()
    try:
        yield
    finally:
        scope.close()


def stats() -> dict:
    """Counters since the process started or the last ``reset()``:
    ``backwards`` = ``plan_backwards`` + ``eager_backwards`` +
    ``raised_backwards``; ``eager_by_reason`` says why the stock engine
    served."""
    return _native.stats()


def graph_stats() -> list:
    """One dict per captured structure: state ("pending", "ready" or
    "failed"), nodes, hits, compile time, the fallback reason of a failed
    one (None otherwise), and what CUDA graphs cover of it: cuda_graphs (one
    per shape), graph_backwards, graph_kernels, live_nodes (the nodes each
    graph backward calls live: hooked leaves, and the nodes its graphs are
    cut at), graph_pieces and cuts (where its graphs are cut, and why), and
    plans_only, why it stays on plans under cuda_graphs ("" while it may
    get graphs)."""
    return _native.graph_stats()


def wait_for_compiles(timeout_s: float = 30.0) -> bool:
    """Waits until no compile (or CUDA graph capture) is in flight, at most
    ``timeout_s`` seconds; returns whether all is idle."""
    return _native.wait_for_compiles(timeout_s)


def reset() -> None:
    """Drops every cached plan and graph and zeroes the statistics."""
    _native.reset()


__all__ = [
    "config_error", "enable", "disable", "is_enabled", "enabled", "disabled",
    "stats", "graph_stats", "wait_for_compiles", "reset",
]
