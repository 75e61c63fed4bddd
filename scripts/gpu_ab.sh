#!/usr/bin/env bash
# Run THERE (the GPU machine): two builds of gradd-bench side by side, as
# the README's before → after figures are measured. For each round, model
# and shape mode both builds run back to back, taking turns at going first
# (a slow minute of the host falls on both); each JSON line gets its build
# (A or B), the folder's COMMIT, the round and the arguments, into
# $OUT/ab.jsonl.
#   here:  scripts/gpu_prebuilt.sh pack .deps/bin    (A, e.g. the base)
#          scripts/gpu_prebuilt.sh pack .deps/new    (B, the change)
#   there: scripts/gpu_prebuilt.sh run scripts/gpu_ab.sh .deps/bin .deps/new [ROUNDS] [MODEL...]
# ROUNDS defaults to 1, MODEL to every gradd-bench model; DEVICE (cuda)
# and ITERS (100) may be set in the environment. Both builds run with CUDA
# graphs on, spelled out for builds from before they were the default.
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: scripts/gpu_ab.sh DIR_A DIR_B [ROUNDS] [MODEL...]" >&2; exit 2; }
a=$1 b=$2 rounds=${3:-1}
shift $(($# < 3 ? $# : 3))
models=${*:-mlp deep-mlp convnet lstm transformer wide-mlp encoder resnet18}
out=${OUT:-gpu-out}
mkdir -p "$out"
printf 'cuda_graphs:\n  enabled: true\n' > "$out/graphs_on.yaml"
# Runs build $1 (A or B) from its folder's gradd-bench (its own libgradd.so
# first) on round $2, model $3, shapes $4.
one() {
  local build=$1 round=$2 model=$3 shapes=$4 dir line
  dir=$([ "$build" = A ] && echo "$a" || echo "$b")
  local args="--model $model --shapes $shapes"
  line=$(LD_LIBRARY_PATH=$dir:${LD_LIBRARY_PATH:-} timeout 120 "$dir/gradd-bench" $args \
           --device "${DEVICE:-cuda}" --mode both --config "$out/graphs_on.yaml" \
           --iters "${ITERS:-100}" --warmup 10 2>>"$out/ab.err") \
    || { echo "gradd: $dir $args failed" >&2; return; }
  echo "{\"build\": \"$build\", \"commit\": \"$(cat "$dir/COMMIT" 2>/dev/null)\", \"round\": $round, \"args\": \"$args\", ${line#\{}" >> "$out/ab.jsonl"
}
for round in $(seq "$rounds"); do
  for model in $models; do
    for shapes in fixed sweep; do
      if [ $((round % 2)) = 1 ]; then first=A second=B; else first=B second=A; fi
      one "$first" "$round" "$model" "$shapes"
      one "$second" "$round" "$model" "$shapes"
    done
  done
done
