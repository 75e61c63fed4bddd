"""DistributedDataParallel (gloo, 2 CPU ranks; test_cuda.py runs it over
NCCL on two GPUs) under gradd: the reducer's hooks and final callback fire
from plans, every rank's parameters after training equal a run on the
stock engine bitwise."""

import os
import socket
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import gradd


def train(rank, world, port, policy, use_gradd, out, backend="gloo"):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group(backend, rank=rank, world_size=world)
    device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    if backend == "nccl":
        torch.cuda.set_device(device)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(),
                                torch.nn.Linear(32, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4)).double().to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.001)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    torch.manual_seed(100 + rank)
    if use_gradd:
        gradd.enable(policy)
    for _ in range(5):
        opt.zero_grad(set_to_none=True)
        ddp(torch.randn(8, 16, dtype=torch.double).to(device)).square().mean().backward()
        opt.step()
    stats = gradd.stats()
    gradd.disable()
    torch.save({"params": [p.detach().cpu() for p in model.parameters()], "stats": stats},
               os.path.join(out, f"{'gradd' if use_gradd else 'stock'}-{rank}.pt"))
    dist.destroy_process_group()


def run_ranks(args, seconds=120):
    """Runs `train` on 2 ranks; fails (and kills them) after `seconds`."""
    ranks = mp.spawn(train, args=args, nprocs=2, join=False)
    deadline = time.monotonic() + seconds
    while not ranks.join(timeout=1):
        if time.monotonic() > deadline:
            for p in ranks.processes:
                p.kill()
            pytest.fail(f"DDP ranks still running after {seconds} s")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ddp_two_gloo_ranks_bitwise(tmp_path):
    policy = tmp_path / "sync.yaml"
    policy.write_text("compile:\n  mode: sync\n")
    for use_gradd in (False, True):
        run_ranks((2, free_port(), str(policy), use_gradd, str(tmp_path)))
    for rank in range(2):
        stock = torch.load(tmp_path / f"stock-{rank}.pt")
        ours = torch.load(tmp_path / f"gradd-{rank}.pt")
        assert ours["stats"]["plan_backwards"] == 5, ours["stats"]
        for a, b in zip(stock["params"], ours["params"]):
            assert torch.equal(a.view(torch.int64), b.view(torch.int64))
