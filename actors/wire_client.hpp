#pragma once

// The client end of the daemon's wire (wire_frame.hpp): a broker that
// stands for the daemon in this process. It answers to actors::daemon_actor
// (hello, compile, agree, status requests and reports), so that the daemon
// link, `gradd status` and the launcher talk to it as to the compile
// service itself; it frames each request, and delivers each answer once the
// daemon has proven that it holds the token. When the connection ends, or
// the daemon breaks the protocol, every request out fails at once with a
// gradd error and the broker quits, which its monitors see.

#include "actors/daemon_protocol.hpp"
#include "config/daemon_address.hpp"

#include <caf/actor.hpp>
#include <caf/expected.hpp>

#include <cstdint>
#include <string>

namespace caf {
class actor_system;
}

namespace gradd::actors {

/// Connects to the daemon at `address` (blocking the calling thread for
/// the TCP connect only) and returns its stand-in; `token` proves this end,
/// `max_bytes` bounds any frame the daemon sends. End the stand-in (an exit
/// message) before `system` is destroyed: ~actor_system waits for every
/// connection a broker holds.
caf::expected<daemon_actor> connect_daemon(caf::actor_system& system,
                                           const daemon_address& address, std::string token,
                                           size_t max_bytes);

/// An actor on a thread of its own that answers one request
/// `(caf::connect_atom, host, port)` with connect_daemon's stand-in (for
/// `token` and `max_bytes`) as a `caf::actor`, or its error, and quits: an
/// actor that must not block connects through it.
caf::actor spawn_daemon_connector(caf::actor_system& system, std::string token,
                                  size_t max_bytes);

} // namespace gradd::actors
