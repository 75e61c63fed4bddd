"""The Python benchmark's models give the stock engine's gradients bitwise,
served by plans; `python3 -m gradd.bench` prints gradd-bench's keys."""

import json
import os
import subprocess
import sys

import pytest
import torch

import gradd
from checks import all_bits_equal
from gradd import bench


@pytest.fixture(autouse=True)
def one_thread():
    # Note [Multi-threaded float32 mlp] (tests/engine/models_test.cpp): the
    # forward pass, not the backward, is not reproducible on two threads.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("name", bench.MODELS)
def test_bench_model_bitwise_from_plans(name, sync_policy, request):
    if name == "ddp":  # its one-rank process group goes with the test
        request.addfinalizer(torch.distributed.destroy_process_group)
    model, batch = bench.make_model(name, "cpu", torch.float64)
    bench.backward_once(model, batch, 0, "cpu")
    stock = bench.grads(model)
    with gradd.enabled(sync_policy):
        for _ in range(2):
            bench.backward_once(model, batch, 0, "cpu")
            assert all_bits_equal(stock, bench.grads(model))
    s = gradd.stats()
    assert (s["plan_backwards"], s["eager_backwards"]) == (2, 0)


def test_bench_cli_prints_gradd_bench_keys():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-m", "gradd.bench", "--model", "mlp", "--mode", "both",
                          "--iters", "3", "--warmup", "2"],
                         capture_output=True, text=True, env=env, timeout=120, check=True)
    line = json.loads(out.stdout.strip().splitlines()[-1])
    for key in ("model", "device", "mode", "median_ms", "p90_ms", "first_ms", "plan_backwards",
                "graph_backwards", "eager_backwards", "max_rel_grad_diff", "stock_rel_grad_diff",
                "eager_median_ms", "ratio", "eager_first_ms", "first_ratio", "first_median_ms",
                "eager_first_median_ms", "first_median_ratio"):
        assert key in line
    assert line["plan_backwards"] == 3 and line["max_rel_grad_diff"] == 0


def test_bench_cli_create_graph_steps_run_on_plans():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-m", "gradd.bench", "--model", "mlp", "--mode", "both",
                          "--iters", "3", "--warmup", "2", "--create-graph"],
                         capture_output=True, text=True, env=env, timeout=120, check=True)
    line = json.loads(out.stdout.strip().splitlines()[-1])
    assert line["create_graph"] is True
    # Both backwards of each timed step, gradients equal to the stock engine's.
    assert line["plan_backwards"] == 6 and line["eager_backwards"] == 0
    assert line["max_rel_grad_diff"] == 0


def test_bench_cli_refuses_bad_arguments():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-m", "gradd.bench", "--model", "nope"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 2 and "invalid choice" in out.stderr
