"""Helpers the pytest suite shares: policy files and the bitwise oracle."""

import torch

import gradd

_SYNC_COMPILES = "compile:\n  mode: sync\n"
# Every backward, the first included, by a plan (on CUDA too: no graphs).
SYNC = _SYNC_COMPILES + "cuda_graphs:\n  enabled: false\n"
# SYNC with a CUDA graph for every shape: a structure's first CUDA backward
# is recorded for a capture, later ones replay its graph.
GRAPHS = _SYNC_COMPILES + "cuda_graphs:\n  enabled: true\n  mode: static\n"

_SAME_WIDTH_INT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def write_policy(folder, text, name="policy.yaml"):
    """Writes the policy `text` into `folder`; returns its path."""
    path = folder / name
    path.write_text(text)
    return str(path)


def bits_equal(a, b):
    """Whether two tensors (or two Nones) are the same bits in the same
    layout: dtype, shape, strides, and every element as an integer of its
    width (a NaN equals itself, -0.0 is not 0.0)."""
    if a is None or b is None:
        return a is None and b is None
    if (a.dtype, a.shape, a.stride()) != (b.dtype, b.shape, b.stride()):
        return False
    as_int = _SAME_WIDTH_INT[a.element_size()]
    return torch.equal(a.view(as_int), b.view(as_int))


def all_bits_equal(expected, actual):
    return len(expected) == len(actual) and all(bits_equal(a, b) for a, b in zip(expected, actual))


def check(sync_policy, leaves, step, runs=2, backwards=1):
    """Runs `step` on the stock engine, then `runs` times under gradd from the
    same .grad state; requires equal .grad, equal results (tensors or
    events), and that plans served every gradd run (`backwards` backwards a
    step)."""
    initial = [None if t.grad is None else t.grad.clone() for t in leaves]

    def restore():
        for t, g in zip(leaves, initial):
            t.grad = None if g is None else g.clone()

    restore()
    stock_result = step()
    stock_grads = [None if t.grad is None else t.grad.clone() for t in leaves]
    for _ in range(runs):
        restore()
        before = gradd.stats()["plan_backwards"]
        with gradd.enabled(sync_policy):
            result = step()
        assert gradd.stats()["plan_backwards"] == before + backwards, gradd.stats()
        assert all_bits_equal(stock_grads, [t.grad for t in leaves])
        assert len(result) == len(stock_result)
        for a, b in zip(stock_result, result):
            assert bits_equal(a, b) if isinstance(a, torch.Tensor) else a == b
    assert gradd.stats()["eager_backwards"] == 0
