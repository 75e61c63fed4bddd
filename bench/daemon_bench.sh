#!/usr/bin/env bash
# The daemon's benchmarks (README, Benchmarks) on this machine, one JSON
# line each:
#   ranks     8 ranks (examples/rank.cpp: 3 structures, sync compiles) at
#             once, alone and with a daemon: the job's wall time (every
#             backward of every rank served by a plan) and compiles in all
#   rtt       a compile request for a structure the daemon holds (gradd-daemon-rtt)
#   hostile   bad headers and 300 idle connections: the daemon's memory, what
#             it closed, and the round trip meanwhile (bench/daemon_hostile.py)
#   hit_path  gradd-bench --mode both, alone and with a daemon attached
#   warm      a new daemon on the first one's cache.dir: gradd-bench's first
#             backward (sync compile) against the stock engine's median
#
#   usage: bench/daemon_bench.sh [build-dir]
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
source "$(dirname "$0")/daemon_env.sh"
printf 'compile:\n  mode: sync\n' > "$work/sync.yaml"

# Runs 8 ranks at once; prints the job's wall seconds.
ranks() {
  local start end
  start=$(date +%s.%N)
  for rank in $(seq 0 7); do
    RANK=$rank "$build/gradd_rank" "$work/sync.yaml" 20 > "$work/$1.$rank" &
  done
  wait $(jobs -p | grep -v "^${daemon_pid:-none}$")
  end=$(date +%s.%N)
  awk "BEGIN { print $end - $start }"
}

alone_s=$(ranks alone)
alone_compiles=$(cat "$work"/alone.* | grep -o ' compiles=[0-9]*' | cut -d= -f2 | awk '{ n += $1 } END { print n }')
start_daemon
with_s=$(ranks with)
daemon_compiles=$("$build/gradd" status --json | grep -o '"compiles":[0-9]*' | cut -d: -f2)
printf '{"bench": "ranks", "ranks": 8, "alone_s": %.3f, "alone_compiles": %s, "daemon_s": %.3f, "daemon_compiles": %s}\n' \
  "$alone_s" "$alone_compiles" "$with_s" "$daemon_compiles"

echo "{\"bench\": \"rtt\", $("$build/gradd-daemon-rtt" 2000 | tr -d '{}')}"
python3 "$(dirname "$0")/daemon_hostile.py" "$daemon_pid" "$build"

for attached in no yes; do
  if [ $attached = no ]; then line=$(env -u GRADD_DAEMON "$build/gradd-bench" --model deep-mlp --mode both)
  else line=$("$build/gradd-bench" --model deep-mlp --mode both); fi
  echo "{\"bench\": \"hit_path\", \"daemon\": \"$attached\", ${line#\{}"
done

stop_daemon
start_daemon
line=$("$build/gradd-bench" --model deep-mlp --mode both --config "$work/sync.yaml")
echo "{\"bench\": \"warm\", ${line#\{}"
