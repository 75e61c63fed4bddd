#pragma once

// The daemon end of its wire (actors/wire_frame.hpp): a broker that listens
// on daemon.address and forks each connection into a session of its own.
// A session challenges its peer, reads nothing but a proof until the peer
// has proven it holds the token (within handshake_timeout, in frames of at
// most 4 KiB), then reads frames of at most daemon.max_message_mb and asks
// the compile service for each, in the token's name, so that the service
// knows each connection as one client. Connections that have not finished
// the handshake are capped (max_handshakes); beyond the cap a new one is
// closed at once. A peer that breaks the protocol is logged and dropped;
// the daemon serves everyone else. Each dropped connection counts
// with the service's refusals.

#include "config/daemon_address.hpp"
#include "daemon/compile_service.hpp"

#include <caf/actor.hpp>
#include <caf/expected.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

namespace caf {
class actor_system;
}

namespace gradd::daemon {

/// Connections that may be in their handshake at once.
inline constexpr uint32_t max_handshakes = 64;

/// A connection that has not proven the token by then is closed.
inline constexpr auto handshake_timeout = std::chrono::seconds(2);

struct wire_listener {
  /// Answers `caf::get_atom` with its sessions (`std::vector<caf::actor>`),
  /// for a daemon that ends them before its actor system goes.
  caf::actor server;
  uint16_t port = 0;  ///< the one bound (the system's pick for port 0)
};

/// Listens on `where` for clients of `service`, which holds `token`.
caf::expected<wire_listener> serve_wire(caf::actor_system& system, const daemon_address& where,
                                        service_actor service, std::string token,
                                        const settings& config);

} // namespace gradd::daemon
