"""Python ranks under `gradd launch`: DDP (gloo, 2 CPU ranks) whose
compiles the launcher's daemon makes, every rank's parameters after
training bitwise equal to a run on the stock engine."""

import pathlib
import subprocess
import sys

import pytest
import torch

import gradd
from checks import all_bits_equal, write_policy

GRADD_CLI = pathlib.Path(gradd.__file__).resolve().parents[2] / "gradd"

RANK = """
import sys
import torch
import torch.distributed as dist
import gradd

mode, policy, out = sys.argv[1:4]
dist.init_process_group("gloo")  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the launcher
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(),
                            torch.nn.Linear(32, 4)).double()
ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.001)
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
torch.manual_seed(100 + rank)
if mode == "gradd":
    gradd.enable(policy)
for _ in range(5):
    opt.zero_grad(set_to_none=True)
    ddp(torch.randn(8, 16, dtype=torch.double)).square().mean().backward()
    opt.step()
stats = gradd.stats()
gradd.disable()
torch.save({"params": [p.detach() for p in model.parameters()], "stats": stats},
           f"{out}/{mode}-{rank}.pt")
dist.destroy_process_group()
"""


@pytest.mark.skipif(not GRADD_CLI.exists(), reason=f"no gradd launcher at {GRADD_CLI}")
def test_ddp_ranks_under_gradd_launch_use_its_daemon(tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    policy = write_policy(tmp_path, "compile:\n  mode: sync\ndaemon:\n  address: \"127.0.0.1:0\"\n"
                          f"  token_file: {tmp_path / 'token'}\n")
    for mode in ("stock", "gradd"):
        run = subprocess.run([str(GRADD_CLI), "launch", "--nproc", "2", "--config", policy, "--",
                              sys.executable, str(script), mode, policy, str(tmp_path)],
                             capture_output=True, text=True, timeout=180)
        assert run.returncode == 0, run.stdout + run.stderr
    for rank in range(2):
        stock = torch.load(tmp_path / f"stock-{rank}.pt")
        ours = torch.load(tmp_path / f"gradd-{rank}.pt")
        assert ours["stats"]["plan_backwards"] == 5, ours["stats"]
        assert ours["stats"]["daemon_plans"] >= 1, ours["stats"]
        assert ours["stats"]["daemon_fallbacks"] == 0, ours["stats"]
        assert all_bits_equal(stock["params"], ours["params"])
