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

/// A child process that runs beside the test (a daemon), its stdout and
/// stderr going to files. Killed with SIGKILL if still running when it is
/// destroyed.
class background_child {
public:
  /// Starts `argv` as run_child does; output goes to `out_file`, `err_file`.
  background_child(const std::vector<std::string>& argv, const std::string& out_file,
                   const std::string& err_file, const std::vector<std::string>& env = {});
  ~background_child();
  background_child(const background_child&) = delete;
  background_child& operator=(const background_child&) = delete;

  void signal(int number) const;

  /// Its resident memory now (VmRSS), in KiB; 0 once it has ended.
  uint64_t resident_kib() const;

  int pid() const { return pid_; }

  /// Waits at most `bound` for it to end (then kills it); its exit as
  /// run_child reports one, with what it wrote.
  child_result wait(std::chrono::milliseconds bound);

private:
  int pid_ = -1;
  bool reaped_ = false;
  std::string out_file_;
  std::string err_file_;
};

} // namespace gradd::test
