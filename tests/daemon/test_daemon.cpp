// The daemon tests' helpers (see test_daemon.hpp).

#include "daemon/test_daemon.hpp"

#include "config/daemon_address.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

namespace gradd::test {

case_folder::case_folder() {
  char name[] = "/tmp/gradd-daemon-test-XXXXXX";
  REQUIRE(::mkdtemp(name) != nullptr);
  path_ = name;
}

case_folder::~case_folder() {
  // Not std::filesystem::remove_all: libtorch.so's older copy crashed in it.
  std::system(("rm -rf '" + path_ + "'").c_str());
}

void write_file(const std::string& path, const std::string& text, unsigned mode) {
  {
    std::ofstream out(path, std::ios::trunc);
    out << text;
  }
  REQUIRE(::chmod(path.c_str(), mode) == 0);
}

uint16_t free_port() {
  auto port = free_loopback_port();
  REQUIRE(port);
  return *port;
}

test_daemon::test_daemon(const case_folder& folder, const std::string& extra,
                         const std::string& address, const std::string& name,
                         const std::string& daemon_keys)
    : token_file_(folder / "token") {
  auto policy = folder / (name + ".yaml");
  auto address_file = folder / (name + ".address");
  ::unlink(address_file.c_str());
  write_file(policy, "daemon:\n  address: \"" + address + "\"\n  token_file: " + token_file_
                         + "\n" + daemon_keys + "logging:\n  level: info\n" + extra);
  process_ = std::make_unique<background_child>(
      std::vector<std::string>{GRADD_CLI, "daemon", "--config", policy, "--address-file",
                               address_file},
      folder / (name + ".out"), folder / (name + ".err"));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (address_.empty() && std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(address_file);
    std::getline(in, address_);
    if (address_.empty())
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (address_.empty()) {
    std::ifstream err(folder / (name + ".err"));
    std::stringstream text;
    text << err.rdbuf();
    INFO("the daemon did not say where it listens: " << text.str());
    REQUIRE(!address_.empty());
  }
}

std::vector<std::string> test_daemon::client_env() const {
  return {"GRADD_DAEMON=" + address_, "GRADD_TOKEN_FILE=" + token_file_};
}

uint64_t test_daemon::status(const std::string& key) const {
  auto status = run_child({GRADD_CLI, "status", "--json"}, std::chrono::seconds(20), client_env());
  INFO(status.out << status.err);
  REQUIRE(status.exited(0));
  std::smatch found;
  REQUIRE(std::regex_search(status.out, found, std::regex("\"" + key + "\":([0-9]+)")));
  return std::stoull(found[1]);
}

std::string rank_policy(const case_folder& folder, const std::string& extra,
                        const std::string& name) {
  auto path = folder / name;
  write_file(path, "compile:\n  mode: sync\n  timeout_ms: 60000\n" + extra);
  return path;
}

child_result run_rank(const std::string& policy, const std::vector<std::string>& env,
                      int backwards) {
  return run_child({GRADD_RANK, policy, std::to_string(backwards)}, std::chrono::seconds(90),
                   env);
}

uint64_t counter(const std::string& text, const std::string& key) {
  std::smatch found;
  if (!std::regex_search(text, found, std::regex("(^|\\s)" + key + "=([0-9]+)")))
    return UINT64_MAX;
  return std::stoull(found[2]);
}

} // namespace gradd::test
