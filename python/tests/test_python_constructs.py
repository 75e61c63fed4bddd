"""Python autograd Functions and hooks run from plans, called as the stock
engine calls them (each takes the GIL itself), with gradients bitwise equal
to the stock engine's and hooks firing in the same order."""

import pytest
import torch

import gradd
from checks import check


def leaves(*shapes, seed=7):
    torch.manual_seed(seed)
    return [torch.randn(*s, dtype=torch.double, requires_grad=True) for s in shapes]


class ScaleBy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad * w, (grad * x).sum(0)


def test_python_function(sync_policy):
    x, w = leaves((4, 3), (3,))
    check(sync_policy, [x, w],
          lambda: (ScaleBy.apply(x.tanh(), w).square().sum().backward(), [])[1])


def test_python_function_error_reaches_the_caller(sync_policy):
    class Fails(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            raise ValueError("backward says no")

    (x,) = leaves((3,))
    with gradd.enabled(sync_policy):
        with pytest.raises(ValueError, match="backward says no"):
            Fails.apply(x).sum().backward()
        x.grad = None
        (x * 2).sum().backward()  # gradd stays usable
    assert gradd.stats()["raised_backwards"] == 1
    assert torch.equal(x.grad, torch.full((3,), 2.0, dtype=torch.double))


def test_tensor_hooks_and_retain_grad(sync_policy):
    w, b = leaves((4, 4), (4,))
    w.register_hook(lambda g: g * 2)

    def step():
        seen = []
        h = torch.tanh(w + b)
        h.retain_grad()
        h.register_hook(lambda g: seen.append("h") or g + 1)
        out = (h * h).sum()
        out.retain_grad()
        out.backward()
        return [h.grad, out.grad, tuple(seen)]

    check(sync_policy, [w, b], step)


def test_module_full_backward_hooks(sync_policy):
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2)).double()
    events = []
    for i, m in enumerate(model):
        m.register_full_backward_pre_hook(lambda mod, g, i=i: events.append(("pre", i)))
        m.register_full_backward_hook(lambda mod, gi, go, i=i: events.append(("post", i)))
    x = torch.randn(3, 6, dtype=torch.double)

    def step():
        events.clear()
        model(x).square().sum().backward()
        return [tuple(events)]

    check(sync_policy, list(model.parameters()), step)


def test_post_accumulate_grad_hooks_in_order(sync_policy):
    torch.manual_seed(2)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2)).double()
    order = []
    for name, p in model.named_parameters():
        p.register_post_accumulate_grad_hook(lambda p, name=name: order.append(name))
    x = torch.randn(3, 6, dtype=torch.double)

    def step():
        order.clear()
        model(x).sum().backward()
        return [tuple(order)]

    check(sync_policy, list(model.parameters()), step)


def test_autograd_backward_with_several_roots_and_grad_tensors(sync_policy):
    a, b = leaves((3, 4), (4,))

    def step():
        y1 = a.mv(b)
        y2 = (a * b).sum(0)
        torch.autograd.backward([y1, y2], [torch.ones_like(y1), torch.full_like(y2, 0.5)])
        return []

    check(sync_policy, [a, b], step)
