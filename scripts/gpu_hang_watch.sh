#!/usr/bin/env bash
# Run THERE (the GPU machine): runs CMD up to RUNS times, giving each SECONDS.
# A run still going after that is taken for a hang: the GPU's utilization
# (a kernel spinning, or work waiting) and the threads' stacks of the run and
# its children (eu-stack, from scripts/gpu_deps.sh) go into $OUT/hang.txt,
# and it is killed. A run that fails leaves its output in
# $OUT/failed-run-N.out.
#   usage: scripts/gpu_hang_watch.sh RUNS SECONDS CMD...
# e.g. the encoder's shape sweep under allocation recording, which hung in
# 4 of 57 runs while captures shared the training thread's cuBLAS workspace:
#   scripts/gpu_hang_watch.sh 40 20 scripts/gpu_prebuilt.sh run .deps/bin/gradd-bench \
#     --model encoder --shapes sweep --device cuda --mode both --iters 20 --warmup 5 \
#     --memory-snapshot /tmp/hang
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { echo "usage: scripts/gpu_hang_watch.sh RUNS SECONDS CMD..." >&2; exit 2; }
runs=$1 seconds=$2
shift 2
out=${OUT:-gpu-out}
mkdir -p "$out"
stack() {
  LD_LIBRARY_PATH=.deps/root/usr/lib/x86_64-linux-gnu .deps/root/usr/bin/eu-stack -p "$1"
}
for ((run = 1; run <= runs; ++run)); do
  "$@" >"$out/hang-run.out" 2>"$out/hang-run.err" &
  pid=$!
  for ((waited = 0; waited < seconds; ++waited)); do
    sleep 1
    kill -0 "$pid" 2>/dev/null || break
  done
  if kill -0 "$pid" 2>/dev/null; then
    {
      echo "run $run of $runs still going after $seconds s: $*"
      nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv
      for process in "$pid" $(pgrep -P "$pid"); do stack "$process"; done
    } >"$out/hang.txt" 2>&1
    kill -9 "$pid" $(pgrep -P "$pid") 2>/dev/null
    echo "gradd: run $run hung; $out/hang.txt has its stacks, $out/hang-run.{out,err} its output"
    exit 1
  fi
  wait "$pid"
  status=$?
  echo "run $run: exit $status"
  [ "$status" -eq 0 ] || cp "$out/hang-run.out" "$out/failed-run-$run.out"
done
echo "gradd: $runs runs, none hung"
