#!/usr/bin/env bash
# `pip install .` as a user runs it, checked (`make test` runs this): builds
# the wheel (pyproject.toml) against this environment's torch, installs it
# into a fresh virtual environment, and from another folder runs backwards
# there: plan-served and bitwise equal to the stock engine's.
#   usage: scripts/wheel_check.sh [BUILD]
# The wheel builds in BUILD/wheel with BUILD's compiler and ccache, so it
# mostly reuses BUILD's objects; the environment is BUILD/wheel-venv.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
python=${PYTHON:-python3}
venv=$PWD/$build/wheel-venv
rm -rf "$venv"
# The environment's torch (and scikit-build-core, pytest) come from the system's.
"$python" -m venv --system-site-packages --without-pip "$venv"
args="-DCMAKE_CXX_COMPILER=$(sed -n 's/^CMAKE_CXX_COMPILER:FILEPATH=//p' "$build/CMakeCache.txt")"
if command -v ccache >/dev/null; then
  args="$args;-DCMAKE_CXX_COMPILER_LAUNCHER=ccache;-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache"
fi
"$venv/bin/python" -m pip install --quiet --no-build-isolation --no-deps \
  --config-settings=build-dir="$build/wheel" --config-settings=cmake.args="$args" .
cd /tmp
GRADD_VENV=$venv "$venv/bin/python" - <<'CHECK'
import os
import torch
import gradd

assert gradd.__file__.startswith(os.environ["GRADD_VENV"]), gradd.__file__
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 1))
x = torch.randn(8, 16)


def gradients():
    model.zero_grad(set_to_none=True)
    model(x).square().mean().backward()
    return [p.grad.clone() for p in model.parameters()]


stock = gradients()
with gradd.enabled():
    gradients()  # the stock engine, while its plan compiles
    assert gradd.wait_for_compiles()
    served = gradients()
assert gradd.stats()["plan_backwards"] == 1, gradd.stats()
assert all(torch.equal(a, b) for a, b in zip(stock, served)), "gradients differ"
print(f"gradd: the wheel in {os.environ['GRADD_VENV']} served a backward by its plan, bitwise")
CHECK
