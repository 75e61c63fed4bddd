#!/usr/bin/env bash
# Run THERE (the GPU machine, with .deps carried): builds, runs the whole
# test suite and the pytest suite (CUDA cases included), the CUDA
# benchmarks in C++ and Python. Logs go to $OUT
# (the device tool's output folder) or ./gpu-out.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
scripts/gpu_build.sh build-gpu > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/machine.txt"
build-gpu/gradd_tests 2>&1 | tee "$out/tests.log" | tail -12
export PYTHONPATH=$PWD/build-gpu/python NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pytest -q -rs -p no:cacheprovider python/tests 2>&1 | tee "$out/pytest.log" | tail -6
for model in mlp deep-mlp convnet lstm transformer; do
  build-gpu/gradd-bench --model "$model" --device cuda --mode both --iters 200 --warmup 20
done | tee "$out/bench.jsonl"
build-gpu/gradd-bench --model deep-mlp --device cuda --mode both --structures sweep | tee -a "$out/bench.jsonl"
for config in config/gradd.example.yaml config/gradient_ready.yaml; do
  build-gpu/gradd-bench --model transformer --device cuda --mode both --grad-ready-times --config "$config"
done | tee -a "$out/bench.jsonl"
build-gpu/gradd-bench --model deep-mlp --device cpu --mode both | tee -a "$out/bench.jsonl"
for model in mlp hooked transformer resnet18; do
  for config in config/plans_only.yaml ""; do
    python3 -m gradd.bench --model "$model" --device cuda --mode both --iters 200 --warmup 20 ${config:+--config "$config"}
  done
done | tee "$out/pybench.jsonl"
