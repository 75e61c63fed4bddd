// `gradd daemon` with training ranks as child processes: one compile per
// structure for all ranks, gradients bitwise, a cache that outlives the
// daemon, and ranks that go on without a daemon that is absent, killed,
// or refuses them.

#include "daemon/test_daemon.hpp"

#include <catch2/catch.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <regex>
#include <thread>

namespace {

using namespace gradd::test;

/// A rank that ran to the end with every gradient equal to the stock
/// engine's and every backward served by a plan.
void require_bitwise_on_plans(const child_result& rank, int backwards = 4) {
  INFO(rank.out << rank.err);
  REQUIRE(rank.exited(0));
  CHECK(counter(rank.out, "plan_backwards") == 3u * backwards);
}

/// Writes `bytes` random bytes to `address`'s port, then closes.
void send_junk(const std::string& address, size_t bytes, unsigned seed) {
  auto port = static_cast<uint16_t>(std::stoul(address.substr(address.rfind(':') + 1)));
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0);
  std::mt19937 random(seed);
  std::string junk(bytes, '\0');
  for (auto& c : junk)
    c = static_cast<char>(random());
  (void)::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
  ::close(fd);
}

/// The environment of a job of `ranks` ranks whose store listens on `port`.
std::vector<std::string> job_env(uint16_t port, int ranks = 4) {
  return {"WORLD_SIZE=" + std::to_string(ranks), "MASTER_ADDR=127.0.0.1",
          "MASTER_PORT=" + std::to_string(port)};
}

/// A rank policy that tries a lost daemon again after 100 ms.
std::string quick_retry_policy(const case_folder& folder) {
  auto policy = folder / "async.yaml";
  write_file(policy, "daemon:\n  retry_after_ms: 100\n");
  return policy;
}

/// The environment of rank `r` of job `job` (job_env) beside `daemon`.
std::vector<std::string> rank_env(const test_daemon& daemon, const std::vector<std::string>& job,
                                  size_t r) {
  auto env = daemon.client_env();
  env.insert(env.end(), job.begin(), job.end());
  env.push_back("RANK=" + std::to_string(r));
  return env;
}

/// Runs `count` ranks at once, compiling asynchronously, rank r with
/// environment `env_of(r)`; 2000 backwards of each structure, so that each
/// plan serves within the run on a loaded VM too: it arrives after about 50
/// of them on an idle 2-core VM, and the agreed switch comes twice
/// agreement_horizon (250 ms) later, up to 1100 backwards where a rank runs
/// alone on a core (with 1000, 2 runs in 15 ended before it: first_plan=-1).
std::vector<child_result> run_async_ranks(
    const case_folder& folder, size_t count,
    const std::function<std::vector<std::string>(size_t)>& env_of, const std::string& extra = "") {
  auto policy = folder / "async.yaml";
  write_file(policy, "daemon:\n  agreement_timeout_ms: 60000\n" + extra);
  std::vector<child_result> ranks(count);
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ranks.size(); ++r)
    threads.emplace_back([&, r] { ranks[r] = run_rank(policy, env_of(r), 2000); });
  for (auto& t : threads)
    t.join();
  return ranks;
}

/// The number after `key=` in `text` (a rank's longest_ms, say); -1 when missing.
double reading(const std::string& text, const std::string& key) {
  std::smatch found;
  if (!std::regex_search(text, found, std::regex("(^|\\s)" + key + "=([0-9.e+-]+)")))
    return -1;
  return std::stod(found[2]);
}

/// The step at which `rank`'s last structure switched to its plan; the
/// largest int where a structure never did.
int last_switch(const child_result& rank) {
  int last = -1;
  std::regex first_plan("first_plan=(-?[0-9]+)");
  for (auto it = std::sregex_iterator(rank.out.begin(), rank.out.end(), first_plan);
       it != std::sregex_iterator(); ++it) {
    int step = std::stoi((*it)[1]);
    last = step < 0 ? std::numeric_limits<int>::max() : std::max(last, step);
  }
  return last;
}

/// No backward of `rank` waited for other ranks: where its longest came by
/// its last switch to a plan (while ranks agree), it is within 50 ms of the
/// stock engine's longest in the same run. One after every switch waited
/// for no rank: a loaded machine's scheduling (under ASan beside other
/// work on 2 cores: 215 ms at step 1572, every structure switched by 83).
void require_no_wait(const child_result& rank) {
  INFO(rank.out.substr(rank.out.size() > 2000 ? rank.out.size() - 2000 : 0));
  auto longest = reading(rank.out, "longest_ms");
  REQUIRE(longest >= 0);
  if (reading(rank.out, "longest_at") > last_switch(rank))
    return;
  CHECK(longest <= reading(rank.out, "longest_stock_ms") + 50);
}

/// Every rank ran bitwise and switched each structure to its plan at the
/// same backward index as every other rank.
void require_one_switch_index(const std::vector<child_result>& ranks) {
  std::vector<std::string> first_plans;
  for (const auto& rank : ranks) {
    INFO(rank.out << rank.err);
    REQUIRE(rank.exited(0));  // every gradient bitwise the stock engine's
    std::string summary;
    std::regex first_plan("structure=[0-9] first_plan=-?[0-9]+");
    for (auto it = std::sregex_iterator(rank.out.begin(), rank.out.end(), first_plan);
         it != std::sregex_iterator(); ++it)
      summary += it->str() + " ";
    first_plans.push_back(summary);
  }
  std::string said;  // what the ranks logged: an answer that came late, say
  for (const auto& rank : ranks)
    said += rank.err.substr(0, 2000) + "\n";
  INFO(said);
  for (const auto& summary : first_plans) {
    INFO(summary << "against " << first_plans[0]);
    CHECK(summary == first_plans[0]);
  }
  CHECK(first_plans[0].find("first_plan=-1") == std::string::npos);
}

} // namespace

TEST_CASE("four ranks through one daemon: one compile per structure, bitwise", "[daemon]") {
  case_folder folder;
  test_daemon daemon(folder);
  auto policy = rank_policy(folder);
  std::vector<child_result> ranks(4);
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ranks.size(); ++r)
    threads.emplace_back([&, r] {
      auto env = daemon.client_env();
      env.push_back("RANK=" + std::to_string(r));
      ranks[r] = run_rank(policy, env);
    });
  for (auto& t : threads)
    t.join();
  for (const auto& rank : ranks) {
    require_bitwise_on_plans(rank);
    CHECK(counter(rank.out, "daemon_plans") == 3);
    CHECK(counter(rank.out, "daemon_fallbacks") == 0);
    CHECK(rank.out.find("first_plan=0") != std::string::npos);
  }
  CHECK(daemon.status("compiles") == 3);
  CHECK(daemon.status("requests") == 12);
  CHECK(daemon.status("compiles_saved") == 9);
  CHECK(daemon.status("refused") == 0);

  daemon.signal(SIGTERM);
  auto stopped = daemon.wait(std::chrono::seconds(10));
  INFO(stopped.err);
  CHECK(stopped.exited(0));
  CHECK(stopped.err.find("\"event\":\"drained\"") != std::string::npos);
}

TEST_CASE("ranks compiling asynchronously switch each structure to its plan at one backward index",
          "[daemon]") {
  case_folder folder;
  test_daemon daemon(folder);
  auto job = job_env(free_port());
  auto ranks = run_async_ranks(folder, 4, [&](size_t r) {
    return rank_env(daemon, job, r);
  });
  require_one_switch_index(ranks);
  CHECK(daemon.status("agreements") == 3);
  CHECK(daemon.status("store_agreements") == 0);
  CHECK(daemon.status("compiles") == 3);
}

TEST_CASE("ranks that share cache.dir with their daemon take part in agreement, and switch at "
          "one backward index",
          "[daemon]") {
  case_folder folder;
  auto cache = "cache:\n  dir: " + (folder / "cache") + "\n";
  // The second daemon finds every plan on disk, where the ranks used to
  // load them at their misses and never propose.
  for (const char* name : {"first", "second"}) {
    test_daemon daemon(folder, cache, "127.0.0.1:0", name);
    auto job = job_env(free_port());
    auto ranks = run_async_ranks(
        folder, 4,
        [&](size_t r) {
          return rank_env(daemon, job, r);
        },
        cache);
    require_one_switch_index(ranks);
    for (const auto& rank : ranks) {
      CHECK(counter(rank.out, "plans_loaded") == 0);  // asked the daemon instead
      require_no_wait(rank);
    }
    CHECK(daemon.status("agreements") == 3);
    bool first = std::string(name) == "first";
    CHECK(daemon.status("compiles") == (first ? 3u : 0u));
    CHECK(daemon.status("disk_loads") == (first ? 0u : 3u));
  }
}

TEST_CASE("ranks started seconds apart switch at one index, and no backward waits for another "
          "rank",
          "[daemon]") {
  case_folder folder;
  test_daemon daemon(folder);
  auto job = job_env(free_port(), 2);
  auto policy = folder / "async.yaml";
  write_file(policy, "");
  std::vector<child_result> ranks(2);
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ranks.size(); ++r)
    threads.emplace_back([&, r] {
      // The first rank serves the stock engine and proposes again while
      // the second starts, where it used to wait for it.
      std::this_thread::sleep_for(std::chrono::milliseconds(1000 * r));
      // The agreed step is about the first rank's by the time the second
      // proposes (a few thousand on this VM); both run well past it.
      ranks[r] = run_rank(policy, rank_env(daemon, job, r), 9000);
    });
  for (auto& t : threads)
    t.join();
  require_one_switch_index(ranks);
  for (const auto& rank : ranks)
    require_no_wait(rank);
  CHECK(daemon.status("agreements") == 3);
}

TEST_CASE("a daemon killed while ranks agree: no backward waits, and no rank switches alone",
          "[daemon]") {
  case_folder folder;
  auto daemon = std::make_unique<test_daemon>(folder);
  auto job = job_env(free_port(), 2);
  auto policy = quick_retry_policy(folder);
  child_result first, second;
  std::thread runner([&, env = rank_env(*daemon, job, 0)] { first = run_rank(policy, env, 6000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // its plans held, proposing
  auto env = rank_env(*daemon, job, 1);
  daemon->signal(SIGKILL);
  daemon->wait(std::chrono::seconds(10));
  daemon.reset();
  second = run_rank(policy, env, 2000);
  runner.join();
  for (const auto* rank : {&first, &second}) {
    INFO(rank->out.substr(rank->out.size() > 3000 ? rank->out.size() - 3000 : 0) << rank->err);
    REQUIRE(rank->exited(0));  // bitwise
    for (const char* structure : {"structure=0", "structure=1", "structure=2"})
      CHECK(rank->out.find(std::string(structure) + " first_plan=-1") != std::string::npos);
    require_no_wait(*rank);
  }
}

TEST_CASE("a daemon restarted while ranks agree: they switch at one index through the new one",
          "[daemon]") {
  case_folder folder;
  auto address = "127.0.0.1:" + std::to_string(free_port());
  auto daemon = std::make_unique<test_daemon>(folder, "", address, "first");
  auto job = job_env(free_port(), 2);
  auto policy = quick_retry_policy(folder);
  std::vector<child_result> ranks(2);
  // The first rank's plans are held and proposed to the first daemon, then
  // again to the second; its first proposal to that one counts as taken in.
  std::thread first(
      [&, env = rank_env(*daemon, job, 0)] { ranks[0] = run_rank(policy, env, 9000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  daemon->signal(SIGKILL);
  daemon->wait(std::chrono::seconds(10));
  daemon = std::make_unique<test_daemon>(folder, "", address, "second");
  ranks[1] = run_rank(policy, rank_env(*daemon, job, 1), 9000);
  first.join();
  require_one_switch_index(ranks);
  for (const auto& rank : ranks)
    require_no_wait(rank);
  CHECK(daemon->status("agreements") == 3);
}

TEST_CASE("two daemons standing for two machines agree through the job's TCPStore", "[daemon]") {
  case_folder folder;
  c10d::TCPStoreOptions options;
  options.port = 0;
  options.isServer = true;
  options.waitWorkers = false;
  c10d::TCPStore store("127.0.0.1", options);  // the job's, as init_process_group starts it
  std::vector<std::unique_ptr<test_daemon>> machines;
  for (int m = 0; m < 2; ++m)
    machines.push_back(std::make_unique<test_daemon>(folder, "", "127.0.0.1:0",
                                                     "machine" + std::to_string(m)));
  auto job = job_env(store.getPort());
  job.push_back("LOCAL_WORLD_SIZE=2");
  auto ranks = run_async_ranks(folder, 4, [&](size_t r) {
    return rank_env(*machines[r / 2], job, r);
  });
  require_one_switch_index(ranks);
  for (const auto& machine : machines) {
    CHECK(machine->status("agreements") == 3);
    CHECK(machine->status("store_agreements") == 3);
    CHECK(machine->status("compiles") == 3);
  }
}

TEST_CASE("a job on two machines whose store cannot be reached: no rank switches, none waits",
          "[daemon]") {
  case_folder folder;
  test_daemon daemon(folder, "", "127.0.0.1:0", "daemon", "  agreement_timeout_ms: 300\n");
  auto job = job_env(free_port());  // nothing serves a store there
  job.push_back("LOCAL_WORLD_SIZE=2");
  auto ranks = run_async_ranks(folder, 2, [&](size_t r) {
    return rank_env(daemon, job, r);
  });
  for (const auto& rank : ranks) {
    INFO(rank.out << rank.err);
    REQUIRE(rank.exited(0));  // bitwise, and no hang
    for (const char* structure : {"structure=0", "structure=1", "structure=2"})
      CHECK(rank.out.find(std::string(structure) + " first_plan=-1") != std::string::npos);
    require_no_wait(rank);
  }
  CHECK(daemon.status("agreements") == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // an exchange still failing
  daemon.signal(SIGTERM);
  auto stopped = daemon.wait(std::chrono::seconds(10));
  CHECK(stopped.err.find("\"event\":\"no_agreement\"") != std::string::npos);
}

TEST_CASE("a job on a restarted daemon loads its plans from the daemon's cache.dir", "[daemon]") {
  case_folder folder;
  auto cache = "cache:\n  dir: " + (folder / "cache") + "\n";
  auto policy = rank_policy(folder);
  {
    test_daemon first(folder, cache, "127.0.0.1:0", "first");
    require_bitwise_on_plans(run_rank(policy, first.client_env()));
    CHECK(first.status("compiles") == 3);
    first.signal(SIGTERM);
    CHECK(first.wait(std::chrono::seconds(10)).exited(0));
  }
  test_daemon second(folder, cache, "127.0.0.1:0", "second");
  auto rank = run_rank(policy, second.client_env());
  require_bitwise_on_plans(rank);
  // Read from the daemon's cache.dir by the rank itself (Note [Warm start
  // from the daemon's cache]): at the miss once the daemon has welcomed it,
  // by its daemon link before that.
  CHECK(counter(rank.out, "plans_loaded") + counter(rank.out, "daemon_plans") == 3);
  CHECK(rank.out.find("first_plan=0") != std::string::npos);
  CHECK(second.status("compiles") == 0);
  CHECK(second.status("requests") == 0);
}

TEST_CASE("corrupted plans in the daemon's cache.dir: refused by the ranks and the daemon, "
          "compiled again, bitwise",
          "[daemon]") {
  case_folder folder;
  auto cache = "cache:\n  dir: " + (folder / "cache") + "\n";
  auto policy = rank_policy(folder);
  {
    test_daemon first(folder, cache, "127.0.0.1:0", "first");
    require_bitwise_on_plans(run_rank(policy, first.client_env()));
    first.signal(SIGTERM);
    first.wait(std::chrono::seconds(10));
  }
  // One flipped byte in the middle of each plan (it crashed the ranks that
  // read it, before plans had a checksum and a check of what they hold).
  int corrupted = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder / "cache")) {
    std::fstream file(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(0, std::ios::end);
    auto middle = file.tellg() / 2;
    file.seekg(middle);
    char byte = 0;
    file.read(&byte, 1);
    byte ^= 0x10;
    file.seekp(middle);
    file.write(&byte, 1);
    ++corrupted;
  }
  REQUIRE(corrupted == 3);
  test_daemon second(folder, cache, "127.0.0.1:0", "second");
  for (int r = 0; r < 2; ++r) {
    auto rank = run_rank(policy, second.client_env());
    require_bitwise_on_plans(rank);
    INFO(rank.err);
    if (r == 0)
      CHECK(rank.err.find("refused (its checksum does not hold)") != std::string::npos);
  }
  CHECK(second.status("compiles") == 3);  // each refused file compiled again, once
  CHECK(second.status("disk_loads") == 0);
}

TEST_CASE("ranks go on without a daemon that is absent, killed or refusing", "[daemon]") {
  case_folder folder;

  SECTION("absent: nothing listens at the address") {
    write_file(folder / "token", "0123456789abcdef\n", 0600);
    auto rank = run_rank(rank_policy(folder), {"GRADD_DAEMON=127.0.0.1:" + std::to_string(free_port()),
                                               "GRADD_TOKEN_FILE=" + (folder / "token")});
    require_bitwise_on_plans(rank);
    CHECK(counter(rank.out, "daemon_plans") == 0);
    CHECK(counter(rank.out, "daemon_fallbacks") == 3);
    CHECK(rank.elapsed < std::chrono::seconds(30));
  }

  SECTION("killed with SIGKILL while it compiles") {
    test_daemon daemon(folder, "compile:\n  delay_ms: 60000\n");
    auto policy = rank_policy(folder, "daemon:\n  timeout_ms: 120000\n");
    child_result rank;
    std::thread running([&] { rank = run_rank(policy, daemon.client_env()); });
    std::this_thread::sleep_for(std::chrono::seconds(2));
    daemon.signal(SIGKILL);
    running.join();
    require_bitwise_on_plans(rank);
    CHECK(counter(rank.out, "daemon_fallbacks") >= 1);
    CHECK(rank.elapsed < std::chrono::seconds(30));  // the loss is seen, not waited out
  }

  SECTION("refusing a rank with another token, and serving the next one") {
    test_daemon daemon(folder);
    write_file(folder / "wrong-token", "not-the-daemon-s-token\n", 0600);
    auto refused = run_rank(rank_policy(folder), {"GRADD_DAEMON=" + daemon.address(),
                                                  "GRADD_TOKEN_FILE=" + (folder / "wrong-token")});
    require_bitwise_on_plans(refused);
    CHECK(counter(refused.out, "daemon_plans") == 0);
    CHECK(refused.err.find("wrong_token") != std::string::npos);
    CHECK(daemon.status("refused") >= 1);
    auto served = run_rank(rank_policy(folder), daemon.client_env());
    require_bitwise_on_plans(served);
    CHECK(counter(served.out, "daemon_plans") == 3);
  }

  SECTION("sent random bytes and a token file others can read, and serving the next rank") {
    test_daemon daemon(folder);
    for (unsigned seed = 0; seed < 4; ++seed)
      send_junk(daemon.address(), 64 * 1024, seed);
    write_file(folder / "open-token", "x\n", 0644);
    auto open = run_rank(rank_policy(folder), {"GRADD_DAEMON=" + daemon.address(),
                                               "GRADD_TOKEN_FILE=" + (folder / "open-token")});
    require_bitwise_on_plans(open);
    CHECK(open.err.find("mode must be 0600") != std::string::npos);
    auto served = run_rank(rank_policy(folder), daemon.client_env());
    require_bitwise_on_plans(served);
    CHECK(counter(served.out, "daemon_plans") == 3);
    CHECK(daemon.status("compiles") == 3);
  }
}
