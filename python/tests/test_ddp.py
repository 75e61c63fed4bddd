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
from checks import all_bits_equal


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
        if use_gradd:
            gradd.wait_for_compiles()  # the counts below do not hang on compile speed
    stats = gradd.stats()
    gradd.disable()
    torch.save({"params": [p.detach().cpu() for p in model.parameters()], "stats": stats},
               os.path.join(out, f"{'gradd' if use_gradd else 'stock'}-{rank}.pt"))
    dist.destroy_process_group()


def run_ranks(args, seconds=120):
    """Runs `train` on `args[0]` ranks; fails (and kills them) after `seconds`."""
    ranks = mp.spawn(train, args=args, nprocs=args[0], join=False)
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


def train_and_compare(tmp_path, policy, backend="gloo", world=2):
    """Trains on `world` ranks on the stock engine, then under gradd; requires
    every rank's parameters bitwise equal and plans serving every backward.
    Returns each rank's gradd statistics."""
    for use_gradd in (False, True):
        run_ranks((world, free_port(), policy, use_gradd, str(tmp_path), backend))
    stats = []
    for rank in range(world):
        stock = torch.load(tmp_path / f"stock-{rank}.pt")
        ours = torch.load(tmp_path / f"gradd-{rank}.pt")
        assert ours["stats"]["plan_backwards"] == 5, ours["stats"]
        assert all_bits_equal(stock["params"], ours["params"])
        stats.append(ours["stats"])
    return stats


def test_ddp_two_gloo_ranks_bitwise(tmp_path, sync_policy):
    train_and_compare(tmp_path, sync_policy)
