#pragma once

// A peer of the daemon's wire made of the test's own bytes, not gradd's
// client: a raw TCP socket, and the handshake done by hand, so that the
// wire tests can send what no client of gradd's would.

#include "actors/wire_frame.hpp"
#include "config/daemon_address.hpp"
#include "daemon/test_daemon.hpp"

#include <torch/version.h>

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gradd::test {

using namespace gradd::actors;
using namespace std::chrono_literals;

/// A TCP connection of the test's own, speaking bytes, not actors.
class raw_socket {
public:
  explicit raw_socket(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in where{};
    where.sin_family = AF_INET;
    where.sin_port = htons(port);
    where.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&where), sizeof where) == 0);
  }
  explicit raw_socket(int fd) : fd_(fd) {}
  ~raw_socket() { ::close(fd_); }
  raw_socket(const raw_socket&) = delete;
  raw_socket& operator=(const raw_socket&) = delete;

  void send(std::string_view bytes) const {
    ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }
  void send(const std::vector<char>& bytes) const { send(std::string_view(bytes.data(), bytes.size())); }

  /// Exactly `n` bytes within `bound`; nullopt if the peer closed first or
  /// they did not come.
  std::optional<std::string> read(size_t n, std::chrono::milliseconds bound) const {
    std::string bytes(n, '\0');
    size_t done = 0;
    auto deadline = std::chrono::steady_clock::now() + bound;
    while (done < n) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0)
        return std::nullopt;
      auto got = ::recv(fd_, bytes.data() + done, n - done, 0);
      if (got <= 0)
        return std::nullopt;
      done += static_cast<size_t>(got);
    }
    return bytes;
  }

  /// The next frame within `bound`.
  std::optional<std::pair<frame_header, std::string>> frame(std::chrono::milliseconds bound =
                                                                5s) const {
    auto head = read(frame_header_bytes, bound);
    if (!head)
      return std::nullopt;
    auto header = read_header(head->data());
    REQUIRE(header);
    auto payload = header->size ? read(header->size, bound) : std::string();
    if (!payload)
      return std::nullopt;
    return std::make_pair(*header, *payload);
  }

  /// Whether the peer closed the connection within `bound` (frames it sent
  /// first, such as a refusal, are read and dropped).
  bool closed_within(std::chrono::milliseconds bound) const {
    auto deadline = std::chrono::steady_clock::now() + bound;
    char sink[4096];
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0)
        return false;
      auto got = ::recv(fd_, sink, sizeof sink, 0);
      if (got <= 0)
        return true;
    }
  }

  int fd() const { return fd_; }

private:
  int fd_ = -1;
};

inline uint16_t port_of(const test_daemon& daemon) {
  return gradd::parse_daemon_address(daemon.address())->port;
}

/// Reads the daemon's challenge off `socket`; its nonce.
inline std::string challenge_nonce(const raw_socket& socket) {
  auto challenge = socket.frame();
  REQUIRE(challenge);
  REQUIRE(challenge->first.kind == frame_kind::challenge);
  wire_challenge parsed;
  REQUIRE(read_payload(challenge->second, parsed));
  CHECK(parsed.protocol == wire_protocol);
  REQUIRE(parsed.nonce.size() == nonce_bytes);
  return parsed.nonce;
}

inline std::vector<char> proof_frame(const std::string& token, const std::string& daemon_nonce,
                              const std::string& client_nonce) {
  return frame(frame_kind::proof, 0,
               payload_of(wire_proof{client_nonce,
                                     client_mac(token, daemon_nonce, client_nonce)}));
}

/// Proves `token` on `socket` and checks the daemon's proof in return.
inline void handshake(const raw_socket& socket, const std::string& token) {
  auto daemon_nonce = challenge_nonce(socket);
  std::string client_nonce(nonce_bytes, 'c');
  socket.send(proof_frame(token, daemon_nonce, client_nonce));
  auto proven = socket.frame();
  REQUIRE(proven);
  REQUIRE(proven->first.kind == frame_kind::proven);
  wire_proof theirs;
  REQUIRE(read_payload(proven->second, theirs));
  CHECK(theirs.mac == daemon_mac(token, daemon_nonce, client_nonce));
}

inline client_hello hello() { return {"", GRADD_VERSION, TORCH_VERSION, 1, -1}; }

} // namespace gradd::test
