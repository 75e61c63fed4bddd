// `gradd launch`: the ranks' environment, exit codes, a rank that fails or
// crashes, SIGINT, and ranks served by the daemon it started; nothing it
// started is left running.

#include "daemon/test_daemon.hpp"

#include <catch2/catch.hpp>

#include <dirent.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <thread>

namespace {

using namespace gradd::test;
using namespace std::chrono_literals;

/// A launcher policy whose daemon listens on a port of its own.
std::string launch_policy(const case_folder& folder) {
  auto path = folder / "launch.yaml";
  write_file(path, "daemon:\n  address: \"127.0.0.1:0\"\n  token_file: " + (folder / "token")
                       + "\n");
  return path;
}

child_result launch(const case_folder& folder, int ranks, const std::string& script) {
  return run_child({GRADD_CLI, "launch", "--nproc", std::to_string(ranks), "--config",
                    launch_policy(folder), "--", "/bin/sh", "-c", script},
                   60s);
}

/// The daemon address the launcher said it used.
std::string daemon_of(const std::string& launcher_err) {
  std::smatch found;
  REQUIRE(std::regex_search(launcher_err, found, std::regex("gradd daemon at ([0-9.]+:[0-9]+)")));
  return found[1];
}

/// Whether the launcher's daemon (at `address`, with `folder`'s token) still answers.
bool still_listening(const case_folder& folder, const std::string& address) {
  auto status = run_child({GRADD_CLI, "status"}, 20s,
                          {"GRADD_DAEMON=" + address, "GRADD_TOKEN_FILE=" + (folder / "token")});
  INFO(status.out << status.err);
  REQUIRE((status.exited(0) || status.err.find("no daemon at") != std::string::npos));
  return status.exited(0);
}

/// Whether `pid` runs: neither gone nor a zombie (an orphan's new parent
/// may never reap it).
bool alive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  auto name_end = stat.rfind(") ");
  return name_end != std::string::npos && name_end + 2 < stat.size() && stat[name_end + 2] != 'Z';
}

/// The running `gradd daemon` processes whose command line names `text`.
std::vector<pid_t> daemons_naming(const std::string& text) {
  std::vector<pid_t> found;
  DIR* proc = ::opendir("/proc");
  REQUIRE(proc != nullptr);
  while (auto* entry = ::readdir(proc)) {
    pid_t pid = std::atoi(entry->d_name);
    if (pid <= 0)
      continue;
    std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmdline.find(std::string("\0daemon\0", 8)) != std::string::npos
        && cmdline.find(text) != std::string::npos && alive(pid))
      found.push_back(pid);
  }
  ::closedir(proc);
  return found;
}

/// A launcher of two ranks that write their pids into `folder` (pid.<rank>)
/// and sleep.
std::vector<std::string> sleeping_ranks(const case_folder& folder) {
  return {GRADD_CLI, "launch", "--nproc", "2", "--config", launch_policy(folder), "--", "/bin/sh",
          "-c", "echo $$ > " + (folder / "pid.") + "$RANK; exec sleep 60"};
}

/// The pids the two ranks of sleeping_ranks wrote, once both did.
std::vector<pid_t> rank_pids(const case_folder& folder) {
  std::vector<pid_t> ranks;
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (ranks.size() < 2 && std::chrono::steady_clock::now() < deadline) {
    ranks.clear();
    for (int rank : {0, 1}) {
      std::ifstream in(folder / ("pid." + std::to_string(rank)));
      pid_t pid = 0;
      if (in >> pid)
        ranks.push_back(pid);
    }
    std::this_thread::sleep_for(20ms);
  }
  REQUIRE(ranks.size() == 2);
  return ranks;
}

} // namespace

TEST_CASE("gradd launch gives each rank torchrun's environment and gradd's", "[daemon][launch]") {
  case_folder folder;
  auto run = launch(folder, 2,
                    "echo rank=$RANK local=$LOCAL_RANK world=$WORLD_SIZE/$LOCAL_WORLD_SIZE "
                    "daemon=$GRADD_DAEMON token=$GRADD_TOKEN_FILE master=$MASTER_ADDR:$MASTER_PORT");
  INFO(run.out << run.err);
  REQUIRE(run.exited(0));
  auto daemon = daemon_of(run.err);
  for (int rank : {0, 1}) {
    auto r = std::to_string(rank);
    CHECK(run.out.find("rank=" + r + " local=" + r + " world=2/2 daemon=" + daemon + " token="
                       + (folder / "token") + " master=127.0.0.1:")
          != std::string::npos);
  }
  CHECK(!still_listening(folder, daemon));  // the daemon it started is stopped
}

TEST_CASE("gradd launch returns the first failing rank's code and stops the others",
          "[daemon][launch]") {
  case_folder folder;
  SECTION("a rank exits with an error") {
    auto run = launch(folder, 3, "if [ $RANK = 1 ]; then exit 7; fi; sleep 60");
    INFO(run.err);
    CHECK(run.exited(7));
    CHECK(run.elapsed < 30s);  // the sleeping ranks were stopped
    CHECK_THAT(run.err, Catch::Contains("rank 1 failed (7)"));
  }
  SECTION("a rank crashes") {
    auto run = launch(folder, 2, "if [ $RANK = 0 ]; then kill -SEGV $$; fi; sleep 60");
    INFO(run.err);  // where the launcher was when it failed once (60 s, killed by the bound)
    CHECK(run.exited(128 + SIGSEGV));
    CHECK(run.elapsed < 30s);
  }
  SECTION("every rank succeeds") {
    CHECK(launch(folder, 4, "exit 0").exited(0));
  }
}

TEST_CASE("SIGINT to gradd launch stops everything it started", "[daemon][launch]") {
  case_folder folder;
  background_child launcher(sleeping_ranks(folder), folder / "launch.out", folder / "launch.err");
  auto ranks = rank_pids(folder);
  launcher.signal(SIGINT);
  auto run = launcher.wait(30s);
  INFO(run.err);
  CHECK(run.exited(128 + SIGINT));
  for (auto pid : ranks)
    CHECK(!alive(pid));
  CHECK(!still_listening(folder, daemon_of(run.err)));
}

TEST_CASE("a SIGKILLed gradd launch leaves neither its daemon nor its ranks running",
          "[daemon][launch]") {
  case_folder folder;
  background_child launcher(sleeping_ranks(folder), folder / "launch.out", folder / "launch.err");
  auto ranks = rank_pids(folder);
  REQUIRE(daemons_naming(folder.path()).size() == 1);  // its daemon, started before the ranks
  launcher.signal(SIGKILL);
  CHECK(launcher.wait(10s).signal == SIGKILL);
  auto deadline = std::chrono::steady_clock::now() + 5s;
  auto any_left = [&] {
    return alive(ranks[0]) || alive(ranks[1]) || !daemons_naming(folder.path()).empty();
  };
  while (any_left() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  for (auto pid : ranks)
    CHECK(!alive(pid));
  CHECK(daemons_naming(folder.path()).empty());
}

TEST_CASE("gradd launch of a command that cannot start fails and stops its daemon",
          "[daemon][launch]") {
  case_folder folder;
  SECTION("no such file") {
    auto run = run_child({GRADD_CLI, "launch", "--nproc", "2", "--config", launch_policy(folder),
                          "--", "/nonexistent/cmd"},
                         60s);
    INFO(run.err);
    CHECK(run.exited(127));
    CHECK_THAT(run.err, Catch::Contains("cannot start rank 0 (/nonexistent/cmd): No such file or "
                                        "directory; stopping the others"));
    CHECK(daemons_naming(folder.path()).empty());
    CHECK(!still_listening(folder, daemon_of(run.err)));
  }
  SECTION("a file that is not executable") {
    write_file(folder / "script", "exit 0\n", 0644);
    auto run = run_child({GRADD_CLI, "launch", "--nproc", "2", "--config", launch_policy(folder),
                          "--", folder / "script"},
                         60s);
    INFO(run.err);
    CHECK(run.exited(126));
    CHECK_THAT(run.err, Catch::Contains("cannot start rank 0 (" + (folder / "script")
                                        + "): Permission denied"));
    CHECK(daemons_naming(folder.path()).empty());
  }
  SECTION("a rank whose shell cannot find its command") {
    auto run = launch(folder, 2, "exec /nonexistent/cmd");
    INFO(run.err);
    CHECK(run.exited(127));
    CHECK_THAT(run.err, Catch::Contains("failed (127); stopping the others"));
    CHECK(daemons_naming(folder.path()).empty());
  }
}

TEST_CASE("gradd launch uses a daemon that already answers, and leaves it running",
          "[daemon][launch]") {
  case_folder folder;
  auto address = "127.0.0.1:" + std::to_string(free_port());
  test_daemon daemon(folder, "", address);
  auto policy = folder / "reuse.yaml";
  write_file(policy, "daemon:\n  address: \"" + address + "\"\n  token_file: "
                         + (folder / "token") + "\n");
  auto run = run_child({GRADD_CLI, "launch", "--nproc", "2", "--config", policy, "--", "/bin/sh",
                        "-c", "echo daemon=$GRADD_DAEMON"},
                       60s);
  INFO(run.out << run.err);
  REQUIRE(run.exited(0));
  CHECK_THAT(run.err, Catch::Contains("gradd daemon at " + address + " (already running)"));
  CHECK(run.out.find("daemon=" + address) != std::string::npos);
  CHECK(still_listening(folder, address));
}

TEST_CASE("ranks under gradd launch compile once per structure with its daemon, bitwise",
          "[daemon][launch]") {
  case_folder folder;
  auto policy = rank_policy(folder, "daemon:\n  address: \"127.0.0.1:0\"\n  token_file: "
                                        + (folder / "token") + "\n");
  auto run = run_child({GRADD_CLI, "launch", "--nproc", "2", "--config", policy, "--", GRADD_RANK,
                        policy, "3"},
                       90s);
  INFO(run.out << run.err);
  REQUIRE(run.exited(0));
  CHECK(run.out.find("rank 0 structure 2 backward 2: plan, gradients equal") != std::string::npos);
  CHECK(run.out.find("rank 1 structure 2 backward 2: plan, gradients equal") != std::string::npos);
  CHECK(run.out.find("DIFFER") == std::string::npos);
  std::regex served("daemon_plans=3 daemon_fallbacks=0");
  CHECK(std::distance(std::sregex_iterator(run.out.begin(), run.out.end(), served),
                      std::sregex_iterator()) == 2);
}
