#!/usr/bin/env bash
# Run THERE (the GPU machine): the README's benchmark table, every model
# with fixed and swept shapes under the default policy (graphs on), ROUNDS times
# (models interleaved, so a slow hour spreads over all of them). Each JSON
# line gets its round and arguments; lines go to $OUT/bench.jsonl.
#   usage: scripts/gpu_bench.sh [BENCH] [ROUNDS]
# BENCH defaults to build-gpu/gradd-bench (scripts/gpu_build.sh); for
# prebuilt binaries: scripts/gpu_prebuilt.sh run scripts/gpu_bench.sh .deps/bin/gradd-bench
set -uo pipefail
cd "$(dirname "$0")/.."
bench=${1:-build-gpu/gradd-bench}
rounds=${2:-1}
out=${OUT:-gpu-out}
mkdir -p "$out"
for round in $(seq "$rounds"); do
  for model in mlp deep-mlp convnet lstm transformer wide-mlp encoder resnet18; do
    for shapes in fixed sweep; do
      args="--model $model --shapes $shapes"
      line=$(timeout 120 "$bench" $args --device cuda --mode both \
               --iters 100 --warmup 10 2>>"$out/bench.err") || { echo "gradd: $args failed" >&2; continue; }
      echo "{\"round\": $round, \"args\": \"$args\", ${line#\{}" >> "$out/bench.jsonl"
    done
  done
done
