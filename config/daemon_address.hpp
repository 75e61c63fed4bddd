#pragma once

// Where a `gradd daemon` listens: "host:port" (policy daemon.address,
// $GRADD_DAEMON).

#include "gradd/settings.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace gradd {

struct daemon_address {
  std::string host;
  uint16_t port = 0;  ///< 0: the daemon lets the system pick one
};

/// "host:port" with a non-empty host and a decimal port in [0, 65535];
/// nullopt for anything else.
std::optional<daemon_address> parse_daemon_address(const std::string& text);

std::string to_string(const daemon_address& address);

/// A loopback port nothing listens on now (bound, then closed again): for a
/// job's MASTER_PORT, or a daemon of a test's own. nullopt if none can be had.
std::optional<uint16_t> free_loopback_port();

/// The daemon a process compiles with: $GRADD_DAEMON (a launcher's, naming
/// the daemon it runs), else daemon.address; nullopt for none, for port 0
/// (which only tells a daemon to listen on any port), or for an address
/// that does not parse (check_usable refuses those at enable).
std::optional<daemon_address> configured_daemon(const settings& s);

} // namespace gradd
