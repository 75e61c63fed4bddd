#!/usr/bin/env bash
# Agreement across ranks (design.md, Agreement) on this machine, one JSON
# line per rank and case: the step at which each structure switched to its
# plan (-1: never) and the longest backward, gradd's and the stock
# engine's, in the same run (examples/rank.cpp, async compiles):
#   apart    two ranks started a second apart
#   shared   four ranks sharing cache.dir with a daemon restarted on it
#   killed   the daemon killed while one rank proposes; the other starts after
#
#   usage: bench/agreement_bench.sh [build-dir]
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
source "$(dirname "$0")/daemon_env.sh"
export MASTER_ADDR=127.0.0.1
printf 'cache:\n  dir: %s\ndaemon:\n  retry_after_ms: 100\n' "$work/cache" > "$work/rank.yaml"

# One JSON line from rank output file $2 of case $1.
report() {
  local firsts longest stock
  firsts=$(grep -o 'first_plan=-\?[0-9]*' "$2" | cut -d= -f2 | paste -sd, -)
  longest=$(grep -o 'longest_ms=[0-9.]*' "$2" | cut -d= -f2)
  stock=$(grep -o 'longest_stock_ms=[0-9.]*' "$2" | cut -d= -f2)
  printf '{"case": "%s", "rank": "%s", "first_plan": [%s], "longest_ms": %s, "longest_stock_ms": %s}\n' \
    "$1" "$(basename "$2")" "$firsts" "$longest" "$stock"
}

start_daemon
export WORLD_SIZE=2 MASTER_PORT=$((40000 + RANDOM % 20000))
RANK=0 "$build/gradd_rank" "$work/rank.yaml" 9000 > "$work/apart.0" 2>/dev/null &
sleep 1
RANK=1 "$build/gradd_rank" "$work/rank.yaml" 9000 > "$work/apart.1" 2>/dev/null
wait $(jobs -p | grep -v "^$daemon_pid$")
report apart "$work/apart.0"; report apart "$work/apart.1"

stop_daemon
start_daemon  # a new daemon on the first one's cache.dir
export WORLD_SIZE=4 MASTER_PORT=$((40000 + RANDOM % 20000))
for rank in 0 1 2 3; do RANK=$rank "$build/gradd_rank" "$work/rank.yaml" 3000 > "$work/shared.$rank" 2>/dev/null & done
wait $(jobs -p | grep -v "^$daemon_pid$")
for rank in 0 1 2 3; do report shared "$work/shared.$rank"; done

rm -rf "$work/cache"
export WORLD_SIZE=2 MASTER_PORT=$((40000 + RANDOM % 20000))
RANK=0 "$build/gradd_rank" "$work/rank.yaml" 6000 > "$work/killed.0" 2>/dev/null &
sleep 1.5
stop_daemon KILL
RANK=1 "$build/gradd_rank" "$work/rank.yaml" 2000 > "$work/killed.1" 2>/dev/null
wait
report killed "$work/killed.0"; report killed "$work/killed.1"
