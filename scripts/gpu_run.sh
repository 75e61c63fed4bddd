#!/usr/bin/env bash
# Run THERE (the GPU machine, with .deps carried): builds, runs the whole
# test suite (CUDA cases included) and the CUDA benchmarks. Logs go to $OUT
# (the device tool's output folder) or ./gpu-out.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
scripts/gpu_build.sh build-gpu > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/machine.txt"
build-gpu/gradd_tests 2>&1 | tee "$out/tests.log" | tail -12
for model in mlp deep-mlp convnet lstm transformer; do
  build-gpu/gradd-bench --model "$model" --device cuda --mode both --iters 200 --warmup 20
done | tee "$out/bench.jsonl"
build-gpu/gradd-bench --model deep-mlp --device cuda --mode both --structures sweep | tee -a "$out/bench.jsonl"
for config in config/gradd.example.yaml config/gradient_ready.yaml; do
  build-gpu/gradd-bench --model transformer --device cuda --mode both --grad-ready-times --config "$config"
done | tee -a "$out/bench.jsonl"
build-gpu/gradd-bench --model deep-mlp --device cpu --mode both | tee -a "$out/bench.jsonl"
