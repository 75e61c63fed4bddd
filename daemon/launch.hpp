#pragma once

// `gradd launch --nproc N [--config FILE] -- CMD ARGS...`: runs N training
// ranks of CMD beside a gradd daemon, as torchrun would run them.
//
// The daemon is the one at $GRADD_DAEMON, else daemon.address, else
// 127.0.0.1:29517, if one answers there; otherwise the launcher starts one
// there (this program, `gradd daemon`; port 0: on any port) and stops it at
// the end. Each rank gets
// torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT; the last two kept if set) and gradd's
// (GRADD_DAEMON, GRADD_TOKEN_FILE, GRADD_CONFIG when --config is given).
// Each rank runs in a process group of its own; SIGINT, SIGTERM and SIGHUP
// are passed on to the ranks' groups. When a rank fails, the others get
// SIGTERM (SIGKILL 10 s later); a rank that cannot be started counts as
// one that failed with 127 (not found) or 126, as in a shell. The daemon
// it started and the ranks get SIGTERM when the launcher ends, even by
// SIGKILL (what a rank starts itself is the rank's to stop). Exit status:
// the first failing rank's (128 + the signal for one killed by a signal),
// else 0; 1 when the launch itself fails, 2 for bad arguments.

#include <string>
#include <vector>

namespace gradd::daemon {

struct launch_options {
  int ranks = 0;
  std::string config;                ///< a policy file, or "" for $GRADD_CONFIG / the defaults
  std::vector<std::string> command;  ///< CMD ARGS...
};

/// `self` is this program's path, for starting `gradd daemon`.
int launch(const std::string& self, const launch_options& options);

} // namespace gradd::daemon
