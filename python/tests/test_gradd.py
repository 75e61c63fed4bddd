"""gradd in a Python process: plans serve backwards started from Python,
bitwise equal to the stock engine, and the API behaves as documented."""

import threading

import pytest
import torch

import gradd
from checks import all_bits_equal


def mlp(seed=3):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(),
                               torch.nn.Linear(32, 4)).double()


def step(model, x):
    for p in model.parameters():
        p.grad = None
    model(x).square().sum().backward()
    return [p.grad.clone() for p in model.parameters()]


def test_plans_serve_backward_bitwise(sync_policy):
    model, x = mlp(), torch.randn(8, 16, dtype=torch.double)
    stock = step(model, x)
    with gradd.enabled(sync_policy):
        runs = [step(model, x) for _ in range(3)]
    s = gradd.stats()
    assert (s["plan_backwards"], s["eager_backwards"], s["backwards"]) == (3, 0, 3)
    assert s["cache_misses"] == 1 and s["cache_hits"] == 2
    for run in runs:
        assert all_bits_equal(stock, run)
    assert [(g["state"], g["fallback"]) for g in gradd.graph_stats()] == [("ready", None)]
    # No CUDA graph covers a CPU structure, and none is refused either.
    assert [(g["cuda_graphs"], g["graph_backwards"], g["graph_kernels"], g["plans_only"])
            for g in gradd.graph_stats()] == [(0, 0, 0, "")]


def test_autograd_grad_with_several_outputs(sync_policy):
    model, x = mlp(), torch.randn(8, 16, dtype=torch.double)
    params = list(model.parameters())

    def grads():
        out = model(x)
        return torch.autograd.grad([out.square().sum(), out.sum()], params[:2])

    stock = grads()
    with gradd.enabled(sync_policy):
        ours = grads()
    assert gradd.stats()["plan_backwards"] == 1
    assert all_bits_equal(stock, ours)
    assert all(p.grad is None for p in params)


def test_scopes_nest_and_restore():
    assert not gradd.is_enabled()
    with gradd.enabled():
        assert gradd.is_enabled()
        with gradd.disabled():
            assert not gradd.is_enabled()
            with gradd.enabled():
                assert gradd.is_enabled()
            assert not gradd.is_enabled()
        assert gradd.is_enabled()
    assert not gradd.is_enabled()


def test_enable_disable(sync_policy):
    gradd.enable(sync_policy)
    try:
        assert gradd.is_enabled()
        step(mlp(), torch.randn(4, 16, dtype=torch.double))
    finally:
        gradd.disable()
    assert gradd.stats()["plan_backwards"] == 1


def test_an_error_in_a_python_hook_reaches_the_caller(sync_policy):
    w = torch.randn(5, dtype=torch.double, requires_grad=True)

    def hook(grad):
        raise RuntimeError("hook says no")

    with gradd.enabled(sync_policy):
        y = w * 3
        y.register_hook(hook)
        with pytest.raises(RuntimeError, match="hook says no"):
            y.sum().backward()
        step(mlp(), torch.randn(4, 16, dtype=torch.double))  # gradd is still usable
    s = gradd.stats()
    assert (s["raised_backwards"], s["plan_backwards"]) == (1, 1)


def test_a_bad_policy_names_file_line_and_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("compile:\n  mode: sometimes\n")
    with pytest.raises(gradd.config_error, match=r"bad\.yaml.*2.*compile\.mode"):
        gradd.enable(str(bad))
    assert not gradd.is_enabled()


def test_eight_threads_backward_at_once(sync_policy):
    x = torch.randn(8, 16, dtype=torch.double)
    models = [mlp(seed) for seed in range(8)]
    stock = [step(m, x) for m in models]
    results = [None] * 8

    def worker(i):
        results[i] = [step(models[i], x) for _ in range(5)]

    with gradd.enabled(sync_policy):
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for i in range(8):
        for run in results[i]:
            assert all_bits_equal(stock[i], run)
    s = gradd.stats()
    assert s["backwards"] == 40 and s["plan_backwards"] == 40


def test_gradd_and_pytorch_compiled_autograd_refuse_each_other():
    from torch._dynamo import compiled_autograd

    with compiled_autograd._enable(lambda graph: graph):
        with pytest.raises(RuntimeError, match="compiled autograd is active"):
            gradd.enable()
        with pytest.raises(RuntimeError, match="compiled autograd is active"):
            with gradd.enabled():
                pass
    assert not gradd.is_enabled()
    with gradd.enabled():
        with pytest.raises(RuntimeError, match="gradd is enabled"):
            with compiled_autograd._enable(lambda graph: graph):
                pass
        assert gradd.is_enabled()
        w = torch.randn(3, dtype=torch.double, requires_grad=True)
        (w * 2).sum().backward()  # gradd's hook is still the one installed
    assert gradd.stats()["backwards"] == 1
