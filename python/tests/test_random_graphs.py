"""Random backward graphs started from Python, bitwise equal to the stock
engine on plans: the C++ suite's random programs (tests/engine/
random_graphs_test.cpp) plus what only a Python process has, Python
autograd Functions and Python tensor hooks, some of which change the
gradient they see."""

import random
from collections import namedtuple

import pytest
import torch

from checks import check

N = 5  # every value is N x N
Extra = namedtuple("Extra", "scalar offset")  # an op's arguments beyond its operands


class ScaleRows(torch.autograd.Function):
    """Python user code in the graph: rows scaled by tanh(b)."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b.tanh()

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad * b.tanh(), grad * a * (1 - b.tanh().square())


def _cat_narrow(a, b, x):
    return torch.cat([a, b]).narrow(0, x.offset, N)


def _copy_slices(a, b, x):
    c = a.clone()
    c.narrow(1, x.offset, 2).mul_(b.narrow(1, x.offset, 2).tanh())
    return c


def _in_place(a, b, x):
    c = a * 1.5
    c.mul_(b.sigmoid())
    return c


def _unbind_stack(a, b, x):
    rows = list(a.unbind(0))
    rows[0] = rows[1]  # row 1 twice, row 0 not: an undefined gradient
    return torch.stack(rows)


def _hooked(a, b, x):
    c = a * 1.0  # a value of its own, so the hook sees only this use
    c.register_hook(lambda g: g * x.scalar)
    return c


OPS = {
    "tanh": lambda a, b, x: a.tanh(),
    "sigmoid": lambda a, b, x: a.sigmoid(),
    "scale": lambda a, b, x: a * x.scalar,
    "add": lambda a, b, x: a + b,
    "mul": lambda a, b, x: a * b.tanh(),
    "divide": lambda a, b, x: a / (1 + b * b),
    "mm": lambda a, b, x: a.mm(b.tanh()) / N,
    "transpose": lambda a, b, x: a.t(),
    "broadcast_sum": lambda a, b, x: a.sum(0, keepdim=True) * b / N,
    "cat_narrow": _cat_narrow,
    "copy_slices": _copy_slices,
    "softmax": lambda a, b, x: torch.softmax(a, 1),
    "layer_norm": lambda a, b, x: torch.nn.functional.layer_norm(a, (N,)),
    "mixed_dtype": lambda a, b, x: a * b.to(torch.bfloat16),
    "in_place": _in_place,
    "unbind_stack": _unbind_stack,
    "sort_mul": lambda a, b, x: a.sort(1).values * b,
    "cumsum": lambda a, b, x: a.cumsum(1) / N,
    "python_function": lambda a, b, x: ScaleRows.apply(a, b),
    "tensor_hook": _hooked,
}
FORMS = ["backward", "several_roots", "grad_of_some", "backward_with_inputs", "retained_twice",
         "retained_then_grad"]


class Program:
    """A seeded program: leaves, ops over any earlier value, the backward's form."""

    def __init__(self, seed):
        r = random.Random(seed)
        self.leaves = r.randint(2, 4)
        self.ops = []
        values = self.leaves
        for _ in range(r.randint(6, 16)):
            op = r.choice(sorted(OPS))
            a = values - 1 if r.random() < 0.5 else r.randrange(values)
            b = r.randrange(values)
            self.ops.append((op, a, b, r.uniform(-1.5, 1.5), r.randrange(N - 1)))
            values += 1
        self.outputs = [values - 1] + [r.randrange(self.leaves, values) for _ in range(r.randint(0, 2))]
        self.weights = [r.uniform(0.5, 2.0) for _ in self.outputs]
        self.form = r.choice(FORMS)
        self.wrt = []
        if self.form in ("grad_of_some", "retained_then_grad"):
            self.wrt = [r.randrange(self.leaves), r.randrange(self.leaves, values)]
        elif self.form == "backward_with_inputs":
            self.wrt = [i for i in range(self.leaves) if r.random() < 0.5 or i == self.leaves - 1]
        torch.manual_seed(seed)
        self.tensors = []
        for i in range(self.leaves):
            value = torch.randn(N, N, dtype=torch.double) * 0.7
            leaf = (value.t() if i == 0 else value).detach().requires_grad_()
            if i % 2 == 1:
                leaf.grad = torch.randn(N, N, dtype=torch.double) * 0.1
            self.tensors.append(leaf)

    def __repr__(self):
        ops = "; ".join(f"%{self.leaves + i} = {op}(%{a}, %{b})" for i, (op, a, b, _, _) in enumerate(self.ops))
        return f"{ops}; outputs {self.outputs}, {self.form}, wrt {self.wrt}"

    def backwards(self):
        return 2 if self.form.startswith("retained") else 1

    def run(self):
        """Forward and backward; returns what autograd.grad returned, if called."""
        values = list(self.tensors)
        for op, a, b, scalar, offset in self.ops:
            values.append(OPS[op](values[a], values[b], Extra(scalar, offset)))
        roots = [values[o].sum() * w for o, w in zip(self.outputs, self.weights)]
        loss = sum(roots[1:], roots[0])
        wrt = [values[i] for i in self.wrt]
        if self.form == "backward":
            loss.backward()
        elif self.form == "several_roots":
            torch.autograd.backward(roots)
        elif self.form == "grad_of_some":
            return list(torch.autograd.grad(loss, wrt, allow_unused=True))
        elif self.form == "backward_with_inputs":
            loss.backward(inputs=wrt)
        elif self.form == "retained_twice":
            loss.backward(retain_graph=True)
            loss.backward()
        else:
            loss.backward(retain_graph=True)
            return list(torch.autograd.grad(loss, wrt, allow_unused=True))
        return []


@pytest.mark.parametrize("block", range(4))
def test_random_programs_on_plans(sync_policy, block):
    for seed in range(block * 40, block * 40 + 40):
        program = Program(seed)
        try:
            check(sync_policy, program.tensors, program.run, backwards=program.backwards())
        except AssertionError as e:
            raise AssertionError(f"program {seed}: {program!r}") from e
