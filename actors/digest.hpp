#pragma once

// The few cryptographic primitives gradd needs, from OpenSSL's libcrypto:
// a checksum for plan files, an HMAC for the daemon's handshake, random
// nonces, and a comparison that takes the same time wherever bytes differ.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gradd::actors {

using digest = std::array<uint8_t, 32>;

/// SHA-256 of `bytes`.
digest sha256(std::string_view bytes);

/// HMAC-SHA-256 of `bytes` under `key`.
digest hmac_sha256(std::string_view key, std::string_view bytes);

/// `n` bytes from the system's cryptographic random source. Throws
/// std::runtime_error if it fails.
std::string random_bytes(size_t n);

/// Whether `a` and `b` are equal, in time that does not depend on where
/// they differ.
bool same_bytes(std::string_view a, std::string_view b) noexcept;

/// `d` as the bytes of a string.
inline std::string_view as_bytes(const digest& d) noexcept {
  return {reinterpret_cast<const char*>(d.data()), d.size()};
}

} // namespace gradd::actors
