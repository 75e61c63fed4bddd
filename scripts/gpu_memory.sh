#!/usr/bin/env bash
# Run THERE (the GPU machine): benchmarks.md's "Memory of CUDA graphs" table.
# wide-mlp, encoder and resnet18, fixed and swept shapes, default policy,
# one line each into $OUT/memory.jsonl; then, for each sweep, the allocator
# snapshots' difference (scripts/memory_snapshot_diff.py) into
# $OUT/memory-snapshots.txt.
#   usage: scripts/gpu_memory.sh [BENCH]
# BENCH defaults to build-gpu/gradd-bench (scripts/gpu_build.sh); for
# prebuilt binaries: scripts/gpu_prebuilt.sh run scripts/gpu_memory.sh .deps/bin/gradd-bench
set -uo pipefail
cd "$(dirname "$0")/.."
bench=${1:-build-gpu/gradd-bench}
out=${OUT:-gpu-out}
mkdir -p "$out"
common="--device cuda --mode both --iters 20 --warmup 5"
for model in wide-mlp encoder resnet18; do
  for shapes in fixed sweep; do
    args="--model $model --shapes $shapes"
    line=$(timeout 120 "$bench" $args $common 2>>"$out/memory.err") || { echo "gradd: $args failed (exit $?)" >&2; continue; }
    echo "{\"args\": \"$args\", ${line#\{}" >> "$out/memory.jsonl"
  done
done
python3 - "$out/memory.jsonl" <<'EOF'
import json, sys
fields = ("graph_backwards", "step_graph_backwards", "graph_mb", "step_peak_ratio",
          "step_reserved_ratio", "step_reserved_mb", "eager_step_reserved_mb", "floor_ratio")
for line in open(sys.argv[1]):
    row = json.loads(line)
    print(row["args"], {k: row[k] for k in fields if k in row})
EOF
# Symbolizing each allocation's stack by dladdr is quick enough for 20 steps:
# a run takes seconds. One that stops (exit 124) hung: scripts/gpu_hang_watch.sh
# keeps the stacks of such a run.
for model in wide-mlp encoder resnet18; do
  prefix=/tmp/gradd-memory-$model
  TORCH_SYMBOLIZE_MODE=dladdr timeout 60 "$bench" --model $model --shapes sweep $common \
    --memory-snapshot "$prefix" >/dev/null 2>>"$out/memory.err" || { echo "gradd: $model snapshot failed (exit $?)" >&2; continue; }
  { echo "== $model sweep"; python3 scripts/memory_snapshot_diff.py "$prefix" --frames 3; } \
    >> "$out/memory-snapshots.txt"
done
