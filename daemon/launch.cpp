// `gradd launch` (see launch.hpp). One thread: the launcher blocks the
// signals it handles and takes them, child exits included, from sigtimedwait.

#include "daemon/launch.hpp"

#include "actors/actor_system.hpp"
#include "actors/daemon_protocol.hpp"
#include "actors/type_ids.hpp"
#include "config/daemon_address.hpp"
#include "config/loader.hpp"
#include "config/token_file.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <thread>

extern char** environ;

namespace gradd::daemon {

namespace {

using clock = std::chrono::steady_clock;

constexpr const char* default_daemon = "127.0.0.1:29517";
constexpr auto kill_after = std::chrono::seconds(10);

[[noreturn]] void fail(const std::string& why) {
  std::cerr << "gradd launch: " << why << "\n";
  std::exit(1);
}

/// Whether a gradd daemon of this protocol answers at `address`.
bool daemon_answers(const daemon_address& address) {
  if (address.port == 0)
    return false;
  caf::actor_system_config cfg;
  actors::configure_actor_system(cfg, 1);
  caf::actor_system system{cfg};
  system.await_actors_before_shutdown(false);
  return static_cast<bool>(
      caf::io::remote_actor<actors::daemon_actor>(system, address.host, address.port));
}

/// Starts `argv` with `env` added to this environment, signals unblocked,
/// in a process group of its own (so that a signal reaches what it starts
/// too); its stdout goes to /dev/null if `quiet`.
pid_t spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
            bool quiet = false) {
  std::vector<std::string> strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e;
    if (env.count(entry.substr(0, entry.find('='))) == 0)
      strings.push_back(entry);
  }
  for (const auto& [name, value] : env)
    strings.push_back(name + "=" + value);
  std::vector<char*> envp, args;
  for (auto& s : strings)
    envp.push_back(s.data());
  envp.push_back(nullptr);
  auto argv_copy = argv;
  for (auto& a : argv_copy)
    args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (quiet)
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  int error = posix_spawnp(&pid, args[0], &actions, &attributes, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (error != 0)
    fail("cannot start " + argv[0] + ": " + std::strerror(error));
  return pid;
}

/// The daemon the ranks use: `pid` set when this launcher started it.
struct job_daemon {
  std::string address;
  std::optional<pid_t> pid;
};

job_daemon find_or_start_daemon(const std::string& self, const launch_options& o,
                                const settings& config) {
  // Where the daemon is or is to be: a port 0 in the policy asks for a
  // daemon of this job's own, on any port.
  const char* env = std::getenv("GRADD_DAEMON");
  auto address = *parse_daemon_address(env && *env                     ? env
                                       : !config.daemon.address.empty() ? config.daemon.address
                                                                        : default_daemon);
  if (daemon_answers(address))
    return {to_string(address), std::nullopt};
  char folder[] = "/tmp/gradd-launch-XXXXXX";
  if (::mkdtemp(folder) == nullptr)
    fail("cannot make a folder for the daemon's address");
  auto address_file = std::string(folder) + "/address";
  std::vector<std::string> argv{self, "daemon", "--address", to_string(address),
                                "--address-file", address_file};
  if (!o.config.empty())
    argv.insert(argv.end(), {"--config", o.config});
  auto pid = spawn(argv, {}, true);
  auto deadline = clock::now() + std::chrono::seconds(10);
  std::string listening;
  while (listening.empty() && clock::now() < deadline) {
    std::ifstream in(address_file);
    std::getline(in, listening);
    if (int status = 0; listening.empty() && ::waitpid(pid, &status, WNOHANG) == pid) {
      ::rmdir(folder);
      if (daemon_answers(address))  // another launcher's daemon won the port
        return {to_string(address), std::nullopt};
      fail("gradd daemon could not start (see its message above)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::unlink(address_file.c_str());
  ::rmdir(folder);
  if (listening.empty()) {
    ::kill(pid, SIGKILL);
    fail("gradd daemon did not start listening within 10 s");
  }
  return {listening, pid};
}

/// 128 + the signal for a process a signal ended, else its exit status.
int exit_code_of(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

} // namespace

int launch(const std::string& self, const launch_options& o) {
  sigset_t handled;
  sigemptyset(&handled);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD})
    sigaddset(&handled, s);
  pthread_sigmask(SIG_BLOCK, &handled, nullptr);

  settings config;
  try {
    config = o.config.empty() ? default_settings() : load_settings(o.config);
  } catch (const config_error& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
  auto token_file = token_file_path(config);
  auto daemon = find_or_start_daemon(self, o, config);
  std::cerr << "gradd launch: " << o.ranks << " ranks with gradd daemon at " << daemon.address
            << (daemon.pid ? " (started for this job)" : " (already running)") << std::endl;

  std::map<std::string, std::string> env{
      {"WORLD_SIZE", std::to_string(o.ranks)},  {"LOCAL_WORLD_SIZE", std::to_string(o.ranks)},
      {"GRADD_DAEMON", daemon.address},         {"GRADD_TOKEN_FILE", token_file}};
  const char* master_addr = std::getenv("MASTER_ADDR");
  const char* master_port = std::getenv("MASTER_PORT");
  env["MASTER_ADDR"] = master_addr ? master_addr : "127.0.0.1";
  if (master_port) {
    env["MASTER_PORT"] = master_port;
  } else if (auto port = free_loopback_port()) {
    env["MASTER_PORT"] = std::to_string(*port);
  } else {
    fail("cannot find a free port for MASTER_PORT");
  }
  if (!o.config.empty())
    env["GRADD_CONFIG"] = o.config;
  std::map<pid_t, int> running;  // pid -> rank
  for (int rank = 0; rank < o.ranks; ++rank) {
    env["RANK"] = env["LOCAL_RANK"] = std::to_string(rank);
    running[spawn(o.command, env)] = rank;
  }

  std::optional<int> first_failure;
  std::optional<clock::time_point> kill_at;
  auto signal_ranks = [&](int number) {
    for (const auto& [pid, rank] : running)
      ::kill(-pid, number);  // its process group
  };
  while (!running.empty()) {
    timespec tick{0, 100'000'000};
    int received = sigtimedwait(&handled, nullptr, &tick);
    if (received == SIGINT || received == SIGTERM || received == SIGHUP) {
      signal_ranks(received);
      if (received != SIGHUP && !kill_at)
        kill_at = clock::now() + kill_after;
    }
    int status = 0;
    for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) {
      if (daemon.pid && pid == *daemon.pid) {
        std::cerr << "gradd launch: the daemon ended (" << exit_code_of(status)
                  << "); the ranks go on without it" << std::endl;
        daemon.pid.reset();
        continue;
      }
      auto found = running.find(pid);
      if (found == running.end())
        continue;
      int code = exit_code_of(status);
      if (code != 0 && !first_failure) {
        first_failure = code;
        std::cerr << "gradd launch: rank " << found->second << " failed (" << code
                  << "); stopping the others" << std::endl;
        running.erase(found);
        signal_ranks(SIGTERM);
        kill_at = clock::now() + kill_after;
        continue;
      }
      running.erase(found);
    }
    if (kill_at && clock::now() > *kill_at)
      signal_ranks(SIGKILL);
  }
  if (daemon.pid) {
    ::kill(*daemon.pid, SIGTERM);
    auto deadline = clock::now() + kill_after;
    int status = 0;
    while (::waitpid(*daemon.pid, &status, WNOHANG) == 0) {
      if (clock::now() > deadline) {
        ::kill(*daemon.pid, SIGKILL);
        ::waitpid(*daemon.pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return first_failure.value_or(0);
}

} // namespace gradd::daemon
