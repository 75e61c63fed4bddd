#pragma once

// Runs a program as a child process with a time bound, for tests of what
// only shows from outside a process: its exit status, a crash, a hang.

#include <chrono>
#include <string>
#include <vector>

namespace gradd::test {

struct child_result {
  bool timed_out = false;  ///< killed after the time bound
  int exit_code = -1;      ///< when it exited normally
  int signal = 0;          ///< when a signal ended it (not the bound's kill)
  std::string out;         ///< what it wrote to stdout
  std::string err;         ///< what it wrote to stderr
  std::chrono::milliseconds elapsed{0};

  bool exited(int code) const { return !timed_out && signal == 0 && exit_code == code; }
};

/// Runs `argv` (argv[0] is the path) in this process's environment changed
/// by `env`: "NAME=value" sets a variable, "NAME" removes it. Kills the
/// child after `bound`.
child_result run_child(const std::vector<std::string>& argv, std::chrono::milliseconds bound,
                       const std::vector<std::string>& env = {});

} // namespace gradd::test
