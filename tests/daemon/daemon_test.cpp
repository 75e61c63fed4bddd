// `gradd daemon` with training ranks as child processes: one compile per
// structure for all ranks, gradients bitwise, a cache that outlives the
// daemon, and ranks that go on without a daemon that is absent, killed,
// or refuses them.

#include "daemon/test_daemon.hpp"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
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
  auto policy = folder / "async.yaml";
  write_file(policy, "daemon:\n  agreement_timeout_ms: 60000\n");
  auto job = "MASTER_PORT=" + std::to_string(free_port());
  std::vector<child_result> ranks(4);
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ranks.size(); ++r)
    threads.emplace_back([&, r] {
      auto env = daemon.client_env();
      env.insert(env.end(), {"RANK=" + std::to_string(r), "WORLD_SIZE=4", "MASTER_ADDR=127.0.0.1", job});
      ranks[r] = run_rank(policy, env, 100);
    });
  for (auto& t : threads)
    t.join();
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
  INFO(first_plans[1] << first_plans[2] << first_plans[3]);
  for (const auto& summary : first_plans)
    CHECK(summary == first_plans[0]);
  CHECK(first_plans[0].find("first_plan=-1") == std::string::npos);
  CHECK(daemon.status("agreements") == 3);
  CHECK(daemon.status("compiles") == 3);
}

TEST_CASE("a restarted daemon serves the next job from its cache.dir", "[daemon]") {
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
  CHECK(counter(rank.out, "daemon_plans") == 3);
  CHECK(second.status("compiles") == 0);
  CHECK(second.status("disk_loads") == 3);
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
