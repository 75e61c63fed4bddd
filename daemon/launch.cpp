// `gradd launch` (see launch.hpp). One thread: the launcher blocks the
// signals it handles and takes them, child exits included, from sigtimedwait.

#include "daemon/launch.hpp"

#include "actors/actor_system.hpp"
#include "actors/daemon_protocol.hpp"
#include "actors/type_ids.hpp"
#include "actors/wire_client.hpp"
#include "config/daemon_address.hpp"
#include "config/token_file.hpp"
#include "gradd/policy.hpp"

#include <caf/all.hpp>

#include <fcntl.h>
#include <sys/prctl.h>
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

/// Whether a gradd daemon that holds this user's token answers at `address`.
bool daemon_answers(const daemon_address& address, const settings& config) {
  if (address.port == 0)
    return false;
  std::string token;
  try {
    token = read_token(token_file_path(config));
  } catch (const std::exception&) {
    return false;  // no token yet: no daemon of this user's
  }
  caf::actor_system_config cfg;
  actors::configure_actor_system(cfg, 1);
  caf::actor_system system{cfg};
  system.await_actors_before_shutdown(false);
  auto daemon = actors::connect_daemon(system, address, token,
                                       size_t{config.daemon.max_message_mb} << 20);
  if (!daemon)
    return false;
  bool answers = false;
  caf::scoped_actor self{system};
  self->request(*daemon, std::chrono::seconds(5), actors::status_request{})
      .receive([&](actors::daemon_status&) { answers = true; }, [](caf::error&) {});
  caf::anon_send_exit(*daemon, caf::exit_reason::user_shutdown);
  return answers;
}

/// A process started, or why it could not be.
struct started {
  pid_t pid = -1;
  int error = 0;  ///< errno of the fork or exec that failed
};

/// Starts `argv` with `env` added to this environment, signals unblocked,
/// in a process group of its own (so that a signal reaches what it starts
/// too), to get SIGTERM when this launcher ends, even by SIGKILL; its
/// stdout goes to /dev/null if `quiet`. An exec that fails is reported here,
/// as posix_spawn does, through a pipe that a successful exec closes.
started spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
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
  sigset_t none;
  sigemptyset(&none);
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0)
    return {-1, errno};
  pid_t launcher = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    // The child, until exec: async-signal-safe calls only. posix_spawn
    // cannot ask for the death signal, hence fork. The kernel sends it when
    // the thread that forked ends (the launcher's main thread, which lasts as
    // long as it does); one that ended before prctl left the child with
    // another parent already.
    ::setpgid(0, 0);
    if (::prctl(PR_SET_PDEATHSIG, SIGTERM) == 0 && ::getppid() == launcher) {
      if (int null = quiet ? ::open("/dev/null", O_WRONLY | O_CLOEXEC) : -1; null >= 0)
        ::dup2(null, STDOUT_FILENO);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::execvpe(args[0], args.data(), envp.data());
    }
    int error = errno;
    (void)!::write(report[1], &error, sizeof error);
    ::_exit(127);
  }
  if (pid < 0) {
    int error = errno;
    ::close(report[0]);
    ::close(report[1]);
    return {-1, error};
  }
  ::close(report[1]);
  int error = 0;
  // The signals the launcher takes are blocked here: no EINTR.
  bool failed = ::read(report[0], &error, sizeof error) == sizeof error;
  ::close(report[0]);
  if (failed) {
    ::waitpid(pid, nullptr, 0);
    return {-1, error};
  }
  return {pid, 0};
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
  if (daemon_answers(address, config))
    return {to_string(address), std::nullopt};
  char folder[] = "/tmp/gradd-launch-XXXXXX";
  if (::mkdtemp(folder) == nullptr)
    fail("cannot make a folder for the daemon's address");
  auto address_file = std::string(folder) + "/address";
  std::vector<std::string> argv{self, "daemon", "--address", to_string(address),
                                "--address-file", address_file};
  if (!o.config.empty())
    argv.insert(argv.end(), {"--config", o.config});
  auto [pid, error] = spawn(argv, {}, true);
  if (pid < 0)
    fail("cannot start " + self + " daemon: " + std::strerror(error));
  auto deadline = clock::now() + std::chrono::seconds(10);
  std::string listening;
  while (listening.empty() && clock::now() < deadline) {
    std::ifstream in(address_file);
    std::getline(in, listening);
    if (int status = 0; listening.empty() && ::waitpid(pid, &status, WNOHANG) == pid) {
      ::rmdir(folder);
      if (daemon_answers(address, config))  // another launcher's daemon won the port
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

/// Stops the daemon this launcher started, if it did: SIGTERM, SIGKILL
/// after kill_after.
void stop(const job_daemon& daemon) {
  if (!daemon.pid)
    return;
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
    stop(daemon);
    fail("cannot find a free port for MASTER_PORT");
  }
  if (!o.config.empty())
    env["GRADD_CONFIG"] = o.config;
  std::map<pid_t, int> running;  // pid -> rank
  std::optional<int> first_failure;
  std::optional<clock::time_point> kill_at;
  auto signal_ranks = [&](int number) {
    for (const auto& [pid, rank] : running)
      ::kill(-pid, number);  // its process group
  };
  for (int rank = 0; rank < o.ranks; ++rank) {
    env["RANK"] = env["LOCAL_RANK"] = std::to_string(rank);
    auto [pid, error] = spawn(o.command, env);
    if (pid < 0) {
      // As a shell reports a command it cannot find (127) or run (126).
      first_failure = error == ENOENT ? 127 : 126;
      std::cerr << "gradd launch: cannot start rank " << rank << " (" << o.command[0]
                << "): " << std::strerror(error) << "; stopping the others" << std::endl;
      signal_ranks(SIGTERM);
      kill_at = clock::now() + kill_after;
      break;
    }
    running[pid] = rank;
  }
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
  stop(daemon);
  return first_failure.value_or(0);
}

} // namespace gradd::daemon
