#pragma once

// What the daemon tests share: a folder per case, a `gradd daemon` started
// for the case, ranks (tests/daemon/examples/rank.cpp) run against it, and the
// statistics both print.

#include "child_process.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gradd::test {

/// A fresh folder under /tmp, removed (rm -rf) with the object.
class case_folder {
public:
  case_folder();
  ~case_folder();
  case_folder(const case_folder&) = delete;
  case_folder& operator=(const case_folder&) = delete;

  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

/// Writes `text` into `path`, with permissions `mode`.
void write_file(const std::string& path, const std::string& text, unsigned mode = 0644);

/// A port nothing listens on now (bound and closed again).
uint16_t free_port();

/// `gradd daemon` for one case: its policy is its address, the folder's
/// token file and `daemon_keys` (YAML lines of the daemon section), logging
/// at info, then `extra` (other sections). Started by the constructor,
/// which waits for its address; killed at the end.
class test_daemon {
public:
  test_daemon(const case_folder& folder, const std::string& extra = "",
              const std::string& address = "127.0.0.1:0", const std::string& name = "daemon",
              const std::string& daemon_keys = "");

  const std::string& address() const { return address_; }
  std::string token_file() const { return token_file_; }

  /// The environment a rank of this daemon gets.
  std::vector<std::string> client_env() const;

  /// `gradd status --json`'s counter `key`; fails the test if it cannot be read.
  uint64_t status(const std::string& key) const;

  void signal(int number) const { process_->signal(number); }
  uint64_t resident_kib() const { return process_->resident_kib(); }
  int pid() const { return process_->pid(); }
  child_result wait(std::chrono::milliseconds bound) { return process_->wait(bound); }

private:
  std::string address_;
  std::string token_file_;
  std::unique_ptr<background_child> process_;
};

/// A rank's policy file in `folder`: each backward waits for its plan
/// (compile.mode sync), plus `extra`.
std::string rank_policy(const case_folder& folder, const std::string& extra = "",
                        const std::string& name = "rank.yaml");

/// Runs a rank: three structures, `backwards` backwards each.
child_result run_rank(const std::string& policy, const std::vector<std::string>& env,
                      int backwards = 4);

/// The counter `key` of a line `key=N` in `text`; UINT64_MAX when missing.
uint64_t counter(const std::string& text, const std::string& key);

} // namespace gradd::test
