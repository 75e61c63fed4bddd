"""gradd in a Python process on CUDA: plans (and, with cuda_graphs on, CUDA
graphs) serve backwards bitwise; DDP over NCCL on two GPUs. Skipped, and
said so by pytest, without the GPUs."""

import pytest
import torch

import gradd

from test_ddp import run_ranks, free_port

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA not available")
two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="fewer than 2 GPUs")


def policy(tmp_path, text):
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    return str(path)


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
    text = "compile:\n  mode: sync\n"
    if graphs:
        text += "cuda_graphs:\n  enabled: true\n  mode: static\n"
    gradd.reset()
    with gradd.enabled(policy(tmp_path, text)):
        for _ in range(3):
            ours = mlp_step(model, x)
            gradd.wait_for_compiles()
            for a, b in zip(stock, ours):
                assert torch.equal(a.view(torch.int32), b.view(torch.int32))
    s = gradd.stats()
    assert s["plan_backwards"] == 3
    assert (s["graph_backwards"] >= 1) == graphs


@two_gpus
def test_ddp_two_nccl_ranks_bitwise(tmp_path):
    sync = policy(tmp_path, "compile:\n  mode: sync\n")
    for use_gradd in (False, True):
        run_ranks((2, free_port(), sync, use_gradd, str(tmp_path), "nccl"))
    for rank in range(2):
        stock = torch.load(tmp_path / f"stock-{rank}.pt")
        ours = torch.load(tmp_path / f"gradd-{rank}.pt")
        assert ours["stats"]["plan_backwards"] == 5, ours["stats"]
        for a, b in zip(stock["params"], ours["params"]):
            assert torch.equal(a.cpu().view(torch.int64), b.cpu().view(torch.int64))
