"""gradd in a Python process on CUDA: plans (and, with cuda_graphs on, CUDA
graphs) serve backwards bitwise; DDP over NCCL on two GPUs. Skipped, and
said so by pytest, without the GPUs."""

import pytest
import torch

import gradd
from checks import SYNC, all_bits_equal, write_policy
from test_ddp import train_and_compare

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA not available")
two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="fewer than 2 GPUs")


def mlp_step(model, x):
    for p in model.parameters():
        p.grad = None
    model(x).square().mean().backward()
    torch.cuda.current_stream().synchronize()
    return [p.grad.clone() for p in model.parameters()]


@cuda
@pytest.mark.parametrize("graphs", [False, True])
def test_cuda_backwards_bitwise(tmp_path, graphs):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(),
                                torch.nn.Linear(64, 8)).cuda()
    x = torch.randn(32, 64, device="cuda")
    stock = mlp_step(model, x)
    text = SYNC
    if graphs:
        text += "cuda_graphs:\n  enabled: true\n  mode: static\n"
    with gradd.enabled(write_policy(tmp_path, text)):
        for _ in range(3):
            ours = mlp_step(model, x)
            gradd.wait_for_compiles()
            assert all_bits_equal(stock, ours)
    s = gradd.stats()
    assert s["plan_backwards"] == 3
    assert (s["graph_backwards"] >= 1) == graphs


@cuda
def test_python_backward_bets_before_the_engine(tmp_path):
    """A backward() of a steady loop launches its graph before PyTorch's
    engine starts (Note [Bets before the engine]); autograd.grad, which
    gradd does not walk there, bets from the hook instead."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(),
                                torch.nn.Linear(64, 8)).cuda()
    x = torch.randn(32, 64, device="cuda")
    stock = mlp_step(model, x)
    keys = ("graph_backwards", "graph_early_launches", "graph_bets_before_engine")

    def counts():
        s = gradd.stats()
        return {k: s[k] for k in keys}

    policy = write_policy(tmp_path, SYNC + "cuda_graphs:\n  enabled: true\n  mode: static\n")
    with gradd.enabled(policy):
        for _ in range(4):
            mlp_step(model, x)
            gradd.wait_for_compiles()
        before = counts()
        for _ in range(6):
            assert all_bits_equal(stock, mlp_step(model, x))
        steady = {k: v - before[k] for k, v in counts().items()}
        assert steady["graph_backwards"] == 6
        assert steady["graph_early_launches"] >= 5
        assert steady["graph_bets_before_engine"] == steady["graph_early_launches"]

        params = list(model.parameters())
        for _ in range(4):
            torch.autograd.grad(model(x).square().mean(), params)
            gradd.wait_for_compiles()
        before = counts()
        for _ in range(4):
            torch.autograd.grad(model(x).square().mean(), params)
        by_grad = {k: v - before[k] for k, v in counts().items()}
        assert by_grad["graph_backwards"] == 4
        assert by_grad["graph_early_launches"] >= 3
        assert by_grad["graph_bets_before_engine"] == 0


@two_gpus
def test_ddp_two_nccl_ranks_bitwise(tmp_path, sync_policy):
    train_and_compare(tmp_path, sync_policy, "nccl")
