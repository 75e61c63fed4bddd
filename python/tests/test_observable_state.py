"""What Python code sees during a backward served by gradd is what it sees
on the stock engine: the node being run, the graph task, grad mode; and
backwards with create_graph=True run on plans, bitwise."""

import pytest
import torch

import gradd
from checks import SYNC, check, write_policy

ASYNC = "compile:\n  mode: async\n"


def leaves(*shapes, seed=3):
    torch.manual_seed(seed)
    return [torch.randn(*s, dtype=torch.double, requires_grad=True) for s in shapes]


def node_name():
    node = torch._C._current_autograd_node()
    return "none" if node is None else node.name()


def looked_step(w, x, seen):
    """One forward and backward whose every callback kind notes what the
    engine tells it."""

    def look(where):
        seen.append((where, node_name(), torch._C._current_graph_task_id() != -1,
                     torch.is_grad_enabled(),
                     [torch._C._will_engine_execute_node(n) for n in watched]))

    class Doubled(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 2

        @staticmethod
        def backward(ctx, grad):
            look("function backward")
            return grad * 2

    def pack(t):
        return t

    def unpack(t):
        look("unpack hook")
        # The documented pattern: a hook on the node being run, from here.
        torch._C._current_autograd_node().register_hook(lambda gi, go: look("post-hook") or None)
        return t

    w.register_post_accumulate_grad_hook(lambda p: look("post-accumulate-grad hook"))
    a = Doubled.apply(x @ w)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        b = a.exp()
    c = b.sum(1)
    a.register_hook(lambda g: look("tensor hook") or g)
    c.grad_fn.register_prehook(lambda go: look("pre-hook") or None)
    a.grad_fn.register_hook(lambda gi, go: look("post-hook on the Function") or None)
    watched = [c.grad_fn, b.grad_fn, a.grad_fn]
    c.sum().backward()
    w._post_accumulate_grad_hooks = None
    return seen


@pytest.mark.parametrize("mode", [SYNC, ASYNC], ids=["sync", "async"])
def test_callbacks_see_the_stock_engines_state(tmp_path, mode):
    policy = write_policy(tmp_path, mode)
    w, x = leaves((4, 5), (3, 4))
    stock = looked_step(w, x, [])
    assert ("unpack hook", "ExpBackward0") in [s[:2] for s in stock]
    assert ("post-hook", "ExpBackward0") in [s[:2] for s in stock]  # registered there, fired
    with gradd.enabled(policy):
        for _ in range(3):
            before = gradd.stats()["plan_backwards"]
            under_gradd = looked_step(w, x, [])
            gradd.wait_for_compiles(10.0)
    assert gradd.stats()["plan_backwards"] == before + 1  # the last one on a plan
    assert under_gradd == stock


def critic_and_data():
    torch.manual_seed(5)
    critic = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    critic.double()
    return critic, torch.randn(5, 6, dtype=torch.double)


def test_gradient_penalty_on_plans(sync_policy):
    critic, real = critic_and_data()

    def step():
        x = real.clone().requires_grad_()
        score = critic(x)
        (g,) = torch.autograd.grad(score.sum(), x, create_graph=True)
        penalty = (g.norm(2, dim=1) - 1).pow(2).mean()
        (score.mean() + 10 * penalty).backward()
        return [g.detach(), x.grad]

    check(sync_policy, list(critic.parameters()), step, backwards=2)
    assert gradd.stats()["eager_by_reason"]["create_graph"] == 0


def test_hessian_vector_product_on_plans(sync_policy):
    critic, x = critic_and_data()
    params = list(critic.parameters())
    v = [torch.randn_like(p) for p in params]

    def step():
        grads = torch.autograd.grad(critic(x).pow(2).sum(), params, create_graph=True)
        dot = sum((g * u).sum() for g, u in zip(grads, v))
        return list(torch.autograd.grad(dot, params))

    check(sync_policy, params, step, backwards=2)


def test_double_backward_through_a_python_function(sync_policy):
    class Cubed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            ctx.save_for_backward(t)
            return t.pow(3)

        @staticmethod
        def backward(ctx, grad):
            (t,) = ctx.saved_tensors
            return grad * 3 * t * t

    (x,) = leaves((7,))

    def step():
        (dy,) = torch.autograd.grad(Cubed.apply(x * 1.5).sum(), x, create_graph=True)
        dy.sum().backward()
        return [dy.detach()]

    check(sync_policy, [x], step, backwards=2)
