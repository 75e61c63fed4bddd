#pragma once

// The daemon's wire: gradd's own length-prefixed frames over TCP, in place
// of CAF's BASP, so that no byte from a peer that has not proven it holds
// the token reaches a parser more complex than a 13-byte header. A frame is
// a header (payload size, kind, request id; little-endian) and a payload:
// one message of daemon_protocol.hpp in CAF's binary serialization.
//
// The handshake (Note [The daemon's handshake]): the daemon speaks first
// with a challenge (protocol and a random nonce); the client answers with
// a proof, HMAC-SHA-256 under the token of both nonces, and may send its
// first requests right behind it; the daemon checks the proof before it
// reads anything else and answers with its own proof over the nonces the
// other way round, which the client checks before it believes any answer.
// The token never crosses the wire, and each side knows the other holds it.

#include "actors/daemon_protocol.hpp"

#include <caf/meta/type_name.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gradd::actors {

/// The protocol, as the challenge names it: another one is refused by name.
inline constexpr const char* wire_protocol = "gradd-wire-1";

/// A frame's header, before its payload.
inline constexpr size_t frame_header_bytes = 13;

/// The largest frame either side reads before the handshake is done.
inline constexpr uint32_t handshake_frame_bytes = 4096;

enum class frame_kind : uint8_t {
  challenge = 1,  ///< daemon → client: wire_challenge
  proof,          ///< client → daemon: wire_proof
  proven,         ///< daemon → client: wire_proof (the daemon's)
  hello,          ///< client_hello (its token left empty) → welcome
  welcome,        ///< daemon_welcome
  compile,        ///< compile_request → plan
  plan,           ///< compiled_plan
  agree,          ///< agree_request → agreed
  agreed,         ///< agreed
  report,         ///< client_report, no answer
  status,         ///< status_request (its token left empty) → status_reply
  status_reply,   ///< daemon_status
  refusal,        ///< wire_refusal: a request's answer, or why the connection ends
};

struct frame_header {
  uint32_t size = 0;  ///< payload bytes
  frame_kind kind = frame_kind::refusal;
  uint64_t id = 0;    ///< a request's, echoed by its answer; 0 for the rest
};

struct wire_challenge {
  std::string protocol;
  std::string nonce;
};

struct wire_proof {
  std::string nonce;  ///< the client's (empty in the daemon's proof)
  std::string mac;
};

/// A gradd error, as it crosses the wire.
struct wire_refusal {
  uint8_t code = 0;  ///< errc
  std::string what;
};

/// The header in `bytes` (frame_header_bytes of them), if its kind is one
/// this build knows.
std::optional<frame_header> read_header(const char* bytes);

/// The reading end of a connection, shared by both sides: a header, then,
/// if the header holds, its payload. The connection reads next_read()
/// bytes at a time and hands each read to take().
class frame_reader {
public:
  struct step {
    enum kind_t { read_more, frame, malformed, too_large } kind = read_more;
    frame_header header;       ///< of a frame, or of one too large
    std::string_view payload;  ///< of a frame: the bytes handed to take()
  };

  /// Frames of at most `limit` payload bytes are read.
  explicit frame_reader(size_t limit) : limit_(limit) {}

  void set_limit(size_t limit) { limit_ = limit; }

  /// What `bytes`, the next_read() bytes just read, complete.
  step take(const std::vector<char>& bytes);

  /// How many bytes to read next.
  size_t next_read() const { return reading_ ? reading_->size : frame_header_bytes; }

private:
  size_t limit_;
  std::optional<frame_header> reading_;  ///< the header whose payload comes next
};

/// A frame: `header` with `payload`'s size, then `payload`.
std::vector<char> frame(frame_kind kind, uint64_t id, std::string_view payload);

/// `x` in CAF's binary serialization (messages of daemon_protocol.hpp and
/// of this file).
template <class T>
std::string payload_of(T x);

/// Reads `x` from `payload`, which must hold exactly one. False if not.
template <class T>
bool read_payload(std::string_view payload, T& x);

/// The client's proof: HMAC under `token` of both nonces.
std::string client_mac(const std::string& token, std::string_view daemon_nonce,
                       std::string_view client_nonce);

/// The daemon's proof: HMAC under `token` of both nonces the other way round.
std::string daemon_mac(const std::string& token, std::string_view daemon_nonce,
                       std::string_view client_nonce);

/// Nonces are this long.
inline constexpr size_t nonce_bytes = 32;

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, wire_challenge& x) {
  return f(caf::meta::type_name("gradd.wire_challenge"), x.protocol, x.nonce);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, wire_proof& x) {
  return f(caf::meta::type_name("gradd.wire_proof"), x.nonce, x.mac);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, wire_refusal& x) {
  return f(caf::meta::type_name("gradd.wire_refusal"), x.code, x.what);
}

} // namespace gradd::actors
