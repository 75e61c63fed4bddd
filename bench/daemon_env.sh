# Sourced by the daemon's benchmark scripts: a work folder, and a daemon of
# its own that they start and stop. Needs $build; sets $work, exports
# GRADD_TOKEN_FILE, and writes $work/daemon.yaml (a daemon on any loopback
# port, with its cache.dir in $work/cache).
work=$(mktemp -d /tmp/gradd-bench-XXXXXX)
daemon_pid=
# Stops the daemon with signal $1 (TERM by default).
stop_daemon() { [ -z "$daemon_pid" ] || { kill -"${1:-TERM}" "$daemon_pid"; wait "$daemon_pid" || true; daemon_pid=; }; }
trap 'stop_daemon KILL; rm -rf "$work"' EXIT
export GRADD_TOKEN_FILE=$work/token
printf 'daemon:\n  address: "127.0.0.1:0"\ncache:\n  dir: %s\n' "$work/cache" > "$work/daemon.yaml"

# Starts a daemon and exports GRADD_DAEMON. Not in a subshell: the trap
# stops the daemon by the pid kept here.
start_daemon() {
  rm -f "$work/address"
  "$build/gradd" daemon --config "$work/daemon.yaml" --address-file "$work/address" >/dev/null 2>"$work/daemon.err" &
  daemon_pid=$!
  for _ in $(seq 500); do [ -s "$work/address" ] && break; sleep 0.01; done
  export GRADD_DAEMON=$(cat "$work/address")
}
