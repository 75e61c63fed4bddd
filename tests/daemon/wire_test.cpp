// The daemon's wire under attack: bytes that are not its frames, frames over
// their bounds, connections that never finish the handshake, proofs that
// are nearly right, and fuzzed frames from a peer that holds the token. In
// every case the peer is dropped and the daemon goes on serving; and a
// client never believes a daemon that cannot prove it holds the token.

#include "actors/actor_system.hpp"
#include "actors/ir_inspect.hpp"
#include "actors/type_ids.hpp"
#include "actors/wire_client.hpp"
#include "actors/wire_frame.hpp"
#include "bench/node_tables.hpp"
#include "config/daemon_address.hpp"
#include "config/token_file.hpp"
#include "daemon/test_daemon.hpp"
#include "daemon/wire_peer.hpp"
#include "daemon/wire_server.hpp"

#include <caf/all.hpp>
#include <torch/version.h>

#include <catch2/catch.hpp>

#include <dirent.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <cstdlib>
#include <functional>
#include <optional>
#include <random>
#include <thread>

namespace {

using namespace gradd::actors;
using namespace gradd::test;
using namespace std::chrono_literals;

/// An actor system of the test's own with a welcomed client of `daemon`.
struct welcomed_client {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> system;
  daemon_actor daemon;

  explicit welcomed_client(const test_daemon& test) {
    configure_actor_system(cfg, 1);
    system = std::make_unique<caf::actor_system>(cfg);
    system->await_actors_before_shutdown(false);
    auto found = connect_daemon(*system, *gradd::parse_daemon_address(test.address()),
                                gradd::read_token(test.token_file()), size_t{1} << 20);
    REQUIRE(found);
    daemon = *found;
    caf::scoped_actor self{*system};
    bool welcomed = false;
    self->request(daemon, 10s, hello())
        .receive([&](daemon_welcome&) { welcomed = true; }, [](caf::error&) {});
    REQUIRE(welcomed);
  }
  ~welcomed_client() { caf::anon_send_exit(daemon, caf::exit_reason::user_shutdown); }

  /// Whether the daemon answers a compile request for a new structure.
  bool served(const std::string& kind) {
    caf::scoped_actor self{*system};
    bool ok = false;
    self->request(daemon, 10s,
                  compile_request{"default", gradd::measure::chain_table(2, kind)})
        .receive([&](compiled_plan&) { ok = true; }, [](caf::error&) {});
    return ok;
  }
};

/// $`name` as a number, else `fallback`.
uint64_t env_number(const char* name, uint64_t fallback) {
  const char* value = std::getenv(name);
  return value && *value ? std::stoull(value) : fallback;
}

/// The last 3000 characters of the file at `path`.
std::string log_tail(const std::string& path) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.substr(text.size() > 3000 ? text.size() - 3000 : 0);
}

size_t open_descriptors(int pid) {
  size_t n = 0;
  if (DIR* dir = ::opendir(("/proc/" + std::to_string(pid) + "/fd").c_str())) {
    while (::readdir(dir) != nullptr)
      ++n;
    ::closedir(dir);
  }
  return n;
}

} // namespace

TEST_CASE("the daemon drops bytes that are not its frames and frames over their bounds, and "
          "keeps serving",
          "[daemon][wire]") {
  case_folder folder;
  test_daemon daemon(folder, "", "127.0.0.1:0", "daemon", "  max_message_mb: 1\n");
  welcomed_client rank(daemon);
  auto token = gradd::read_token(daemon.token_file());
  auto resident = daemon.resident_kib();

  SECTION("a BASP client_handshake header with no payload (it killed CAF's BASP)") {
    for (int i = 0; i < 4; ++i) {
      raw_socket socket(port_of(daemon));
      socket.send(std::string(1, '\x01') + std::string(31, '\0'));
      CHECK(socket.closed_within(5s));
    }
  }
  SECTION("a header that declares a payload of 4 GiB, before the handshake") {
    std::vector<std::unique_ptr<raw_socket>> sockets;
    for (int i = 0; i < 4; ++i) {
      sockets.push_back(std::make_unique<raw_socket>(port_of(daemon)));
      auto header = frame(frame_kind::proof, 0, "");
      std::fill(header.begin(), header.begin() + 4, '\xff');
      sockets.back()->send(header);
    }
    for (auto& socket : sockets)
      CHECK(socket->closed_within(1s));  // at the header, not at the handshake's time
  }
  SECTION("a header one byte over the handshake's bound, before the handshake") {
    raw_socket socket(port_of(daemon));
    challenge_nonce(socket);
    auto header = frame(frame_kind::proof, 0, std::string(handshake_frame_bytes + 1, 'x'));
    header.resize(frame_header_bytes);
    socket.send(header);
    CHECK(socket.closed_within(1s));
  }
  SECTION("a frame one byte over daemon.max_message_mb, after the handshake") {
    raw_socket socket(port_of(daemon));
    handshake(socket, token);
    auto header = frame(frame_kind::compile, 1, "");
    uint32_t size = (1u << 20) + 1;
    for (int i = 0; i < 4; ++i)
      header[i] = static_cast<char>((size >> (8 * i)) & 0xff);
    socket.send(header);
    CHECK(socket.closed_within(1s));  // at the header: nothing waits for its payload
  }
  SECTION("a frame at daemon.max_message_mb is read (and refused as a request that does not "
          "parse)") {
    raw_socket socket(port_of(daemon));
    handshake(socket, token);
    socket.send(frame(frame_kind::compile, 1, std::string(1u << 20, '\x01')));
    auto answer = socket.frame(10s);
    REQUIRE(answer);
    CHECK(answer->first.kind == frame_kind::refusal);
  }
  SECTION("a frame of a kind no client sends") {
    raw_socket socket(port_of(daemon));
    handshake(socket, token);
    socket.send(frame(frame_kind::plan, 1, payload_of(compiled_plan{})));
    CHECK(socket.closed_within(5s));
  }
  CHECK(rank.served("After"));
  welcomed_client next(daemon);
  CHECK(next.served("Next"));
  INFO("resident " << resident << " KiB before, " << daemon.resident_kib() << " KiB after");
  CHECK(daemon.resident_kib() < resident + 32 * 1024);
}

TEST_CASE("connections that never finish the handshake are capped and closed in time, while "
          "a welcomed client is served",
          "[daemon][wire]") {
  case_folder folder;
  test_daemon daemon(folder);
  welcomed_client rank(daemon);
  auto descriptors = open_descriptors(daemon.pid());
  std::vector<std::unique_ptr<raw_socket>> idle;
  for (int i = 0; i < 300; ++i)
    idle.push_back(std::make_unique<raw_socket>(port_of(daemon)));
  std::this_thread::sleep_for(200ms);
  INFO("descriptors " << descriptors << " before, " << open_descriptors(daemon.pid())
                      << " with 300 idle connections");
  CHECK(open_descriptors(daemon.pid()) <= descriptors + 64 + 32);  // not the 300
  CHECK(rank.served("During"));
  // The cap's are closed at once, the rest at the handshake's time.
  std::this_thread::sleep_for(gradd::daemon::handshake_timeout + 500ms);
  size_t closed = 0;
  for (auto& socket : idle)
    closed += socket->closed_within(100ms);
  CHECK(closed == idle.size());
  welcomed_client next(daemon);
  CHECK(next.served("After"));
}

TEST_CASE("a peer that nearly holds the token is dropped; one that holds it gets the daemon's "
          "proof",
          "[daemon][wire]") {
  case_folder folder;
  test_daemon daemon(folder);
  auto token = gradd::read_token(daemon.token_file());
  std::string client_nonce(nonce_bytes, 'c');
  uint64_t dropped = 0;  // connections each section has the daemon drop

  SECTION("the token with its last character changed") {
    raw_socket socket(port_of(daemon));
    auto nonce = challenge_nonce(socket);
    auto near = token;
    near.back() = near.back() == '0' ? '1' : '0';
    socket.send(proof_frame(near, nonce, client_nonce));
    auto answer = socket.frame();
    REQUIRE(answer);
    CHECK(answer->first.kind == frame_kind::refusal);
    wire_refusal refusal;
    REQUIRE(read_payload(answer->second, refusal));
    CHECK(refusal.code == static_cast<uint8_t>(errc::wrong_token));
    CHECK(socket.closed_within(5s));
    dropped = 1;
  }
  SECTION("a proof replayed from another connection") {
    raw_socket first(port_of(daemon));
    auto old_nonce = challenge_nonce(first);
    raw_socket second(port_of(daemon));
    challenge_nonce(second);
    second.send(proof_frame(token, old_nonce, client_nonce));
    CHECK(second.closed_within(5s));
    dropped = 1;
  }
  SECTION("the daemon's own proof sent back to it") {
    raw_socket socket(port_of(daemon));
    auto nonce = challenge_nonce(socket);
    socket.send(frame(frame_kind::proof, 0,
                      payload_of(wire_proof{client_nonce, daemon_mac(token, nonce, client_nonce)})));
    CHECK(socket.closed_within(5s));
    dropped = 1;
  }
  SECTION("a client nonce one byte short") {
    raw_socket socket(port_of(daemon));
    auto nonce = challenge_nonce(socket);
    auto short_nonce = client_nonce.substr(1);
    socket.send(frame(frame_kind::proof, 0,
                      payload_of(wire_proof{short_nonce, client_mac(token, nonce, short_nonce)})));
    CHECK(socket.closed_within(5s));
    dropped = 1;
  }
  SECTION("a request before the proof") {
    raw_socket socket(port_of(daemon));
    challenge_nonce(socket);
    socket.send(frame(frame_kind::hello, 1, payload_of(hello())));
    auto answer = socket.frame();
    REQUIRE(answer);
    CHECK(answer->first.kind == frame_kind::refusal);  // not a welcome
    CHECK(socket.closed_within(1s));  // at once, not at the handshake's time
    dropped = 1;
  }
  SECTION("the right proof, then a hello: welcomed") {
    raw_socket socket(port_of(daemon));
    handshake(socket, token);
    socket.send(frame(frame_kind::hello, 7, payload_of(hello())));
    auto answer = socket.frame();
    REQUIRE(answer);
    CHECK(answer->first.kind == frame_kind::welcome);
    CHECK(answer->first.id == 7);
  }
  welcomed_client after(daemon);
  CHECK(after.served("After"));
  CHECK(daemon.status("refused") == dropped);  // each drop is counted, nothing else
}

namespace {

/// A listener of the test's own that plays a daemon which does not hold
/// the client's token: it records what the client sends.
struct impostor {
  int listener = -1;
  uint16_t port = 0;
  std::string received;
  std::thread thread;

  /// `proven`: the proof it answers with, given both nonces; with
  /// `welcome_first`, it sends the welcome before that proof.
  impostor(std::function<std::string(const std::string&, const std::string&)> proven,
           bool welcome_first) {
    listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in where{};
    where.sin_family = AF_INET;
    where.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&where), sizeof where) == 0);
    REQUIRE(::listen(listener, 4) == 0);
    socklen_t size = sizeof where;
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&where), &size);
    port = ntohs(where.sin_port);
    thread = std::thread([this, proven, welcome_first] {
      raw_socket peer(::accept(listener, nullptr, nullptr));
      std::string daemon_nonce(nonce_bytes, 'd');
      peer.send(frame(frame_kind::challenge, 0,
                      payload_of(wire_challenge{wire_protocol, daemon_nonce})));
      auto proof = peer.frame();
      if (!proof)
        return;
      received += proof->second;
      wire_proof theirs;
      read_payload(proof->second, theirs);
      if (auto hello = peer.frame())
        received += hello->second;
      auto welcome = frame(frame_kind::welcome, 1, payload_of(daemon_welcome{1, "/tmp/forged"}));
      if (welcome_first)
        peer.send(welcome);
      peer.send(frame(frame_kind::proven, 0,
                      payload_of(wire_proof{{}, proven(daemon_nonce, theirs.nonce)})));
      peer.send(welcome);
      peer.closed_within(5s);
    });
  }
  ~impostor() {
    if (thread.joinable())
      thread.join();
    ::close(listener);
  }
};

} // namespace

TEST_CASE("a client believes no daemon that cannot prove it holds the token, and never sends "
          "the token",
          "[daemon][wire]") {
  std::string token = "0123456789abcdef0123456789abcdef";
  auto near = token.substr(0, token.size() - 1) + "0";
  using proof_of = std::function<std::string(const std::string&, const std::string&)>;
  struct attempt {
    proof_of proof;
    bool welcome_first;
    gradd::actors::errc refusal;
  };
  attempt attempts[] = {
      // the token with its last character changed
      {[&](const std::string& d, const std::string& c) { return daemon_mac(near, d, c); }, false,
       errc::wrong_token},
      // the client's own proof reflected back
      {[&](const std::string& d, const std::string& c) { return client_mac(token, d, c); }, false,
       errc::wrong_token},
      {[&](const std::string&, const std::string&) { return std::string(32, '\0'); }, false,
       errc::wrong_token},
      // a welcome before any proof, then the right proof
      {[&](const std::string& d, const std::string& c) { return daemon_mac(token, d, c); }, true,
       errc::bad_message},
  };
  for (auto& [proof, welcome_first, expected] : attempts) {
    impostor fake(proof, welcome_first);
    caf::actor_system_config cfg;
    configure_actor_system(cfg, 1);
    caf::actor_system system{cfg};
    system.await_actors_before_shutdown(false);
    auto daemon = connect_daemon(system, {"127.0.0.1", fake.port}, token, size_t{1} << 20);
    REQUIRE(daemon);
    caf::scoped_actor self{system};
    std::optional<caf::error> refused;
    auto asked = hello();
    asked.token = token;  // as the daemon link fills it in
    self->request(*daemon, 10s, asked)
        .receive([](daemon_welcome&) {}, [&](caf::error& e) { refused = e; });
    REQUIRE(refused);  // the forged welcome was not believed
    CHECK(refused->category() == caf::atom("gradd"));
    CHECK(refused->code() == static_cast<uint8_t>(expected));
    caf::anon_send_exit(*daemon, caf::exit_reason::user_shutdown);
    fake.thread.join();
    CHECK(fake.received.find(token) == std::string::npos);
  }
}

TEST_CASE("fuzzed frames, before the handshake and from a peer that holds the token: the "
          "daemon drops or answers each and keeps serving",
          "[daemon][wire]") {
  case_folder folder;
  test_daemon daemon(folder);
  auto token = gradd::read_token(daemon.token_file());
  // GRADD_FUZZ_CASES and GRADD_FUZZ_SEED make this the long fuzzer
  // (README, "Fuzzing"); the suite runs 100 cases of seed 41.
  auto cases = env_number("GRADD_FUZZ_CASES", 100);
  auto seed = env_number("GRADD_FUZZ_SEED", 41);
  std::mt19937 random(static_cast<uint32_t>(seed));
  auto mutate = [&](std::string bytes) {
    switch (random() % 4) {
      case 0:  // flip a byte
        bytes[random() % bytes.size()] ^= static_cast<char>(1 + random() % 255);
        break;
      case 1:  // truncate
        bytes.resize(random() % bytes.size());
        break;
      case 2:  // extend
        bytes.append(1 + random() % 64, static_cast<char>(random()));
        break;
      default:  // a length field read as huge
        if (bytes.size() >= 4) {
          auto at = random() % (bytes.size() - 3);
          std::fill(bytes.begin() + at, bytes.begin() + at + 4, '\xff');
        }
    }
    return bytes;
  };
  // After the handshake, one request of each kind a client sends.
  std::pair<frame_kind, std::string> requests[] = {
      {frame_kind::compile,
       payload_of(compile_request{"default", gradd::measure::chain_table(6, "Fuzz")})},
      {frame_kind::hello, payload_of(hello())},
      {frame_kind::agree, payload_of(agree_request{"127.0.0.1:1", 0, 2, 0, 1, 7, 9})},
      {frame_kind::status, payload_of(status_request{})},
      {frame_kind::report, payload_of(client_report{{"plan_backwards"}, {3}})},
  };
  int answered = 0, dropped = 0;
  for (uint64_t i = 0; i < cases; ++i) {
    INFO("case " << i << " of seed " << seed);
    if (daemon.resident_kib() == 0) {  // it died on the case before
      INFO("the daemon's log ends:\n" << log_tail(folder / "daemon.err"));
      REQUIRE(daemon.resident_kib() > 0);
    }
    raw_socket socket(port_of(daemon));
    if (i % 2 == 0) {  // before the handshake: the proof frame itself
      auto nonce = challenge_nonce(socket);
      auto proof = proof_frame(token, nonce, std::string(nonce_bytes, 'c'));
      socket.send(mutate(std::string(proof.begin(), proof.end())));
    } else {  // after it: a request's payload
      handshake(socket, token);
      socket.send(frame(frame_kind::hello, 1, payload_of(hello())));
      REQUIRE(socket.frame());
      const auto& [kind, payload] = requests[random() % std::size(requests)];
      socket.send(frame(kind, 2, mutate(payload)));
    }
    // An answer (a plan, a refusal, the daemon's proof), the end, or (for
    // a frame cut short) a daemon waiting for the rest, which the test
    // leaves to it by closing.
    if (socket.frame(300ms))
      ++answered;
    else
      ++dropped;
  }
  INFO(answered << " answered, " << dropped << " dropped");
  CHECK(answered > 0);
  CHECK(dropped > 0);
  welcomed_client after(daemon);
  CHECK(after.served("After"));
}
