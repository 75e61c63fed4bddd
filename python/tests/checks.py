"""Helpers the pytest suite shares: policy files and the bitwise oracle."""

import torch

SYNC = "compile:\n  mode: sync\n"  # every backward, the first included, by a plan

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
