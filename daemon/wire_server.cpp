// The daemon end of its wire (see wire_server.hpp).

#include "daemon/wire_server.hpp"

#include "actors/digest.hpp"
#include "actors/errors.hpp"
#include "actors/wire_frame.hpp"
#include "daemon/daemon_log.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <optional>
#include <set>
#include <vector>

namespace gradd::daemon {

namespace {

using namespace actors;

using proven_atom = caf::atom_constant<caf::atom("proven")>;
using deadline_atom = caf::atom_constant<caf::atom("deadline")>;

/// What every session of one listener shares.
struct session_setup {
  service_actor service;
  std::string token;
  size_t max_bytes = 0;
  log_level logging = log_level::warning;
  caf::actor server;
};

struct session_state {
  static inline const char* name = "gradd.wire_session";

  session_setup setup;
  caf::io::connection_handle connection;
  std::string peer;          ///< host:port, for the log
  std::string daemon_nonce;
  bool proven = false;
  bool ended = false;
  frame_reader reader{handshake_frame_bytes};
};

using session_pointer = caf::stateful_actor<session_state, caf::io::broker>*;

void write(session_pointer self, const std::vector<char>& bytes) {
  self->write(self->state.connection, bytes.size(), bytes.data());
  self->flush(self->state.connection);
}

wire_refusal refusal_of(const caf::error& error) {
  if (error.category() == caf::atom("gradd"))
    return {error.code(), actors::what(error)};
  return {static_cast<uint8_t>(errc::compile_failed),
          "the daemon could not answer: " + actors::render(error)};
}

/// Tells the peer why, logs it, and ends the connection.
void drop(session_pointer self, errc code, const std::string& why) {
  auto& s = self->state;
  if (s.ended)
    return;
  s.ended = true;
  log_event(s.setup.logging, log_level::warning, "connection_dropped",
            {{"peer", s.peer}, {"code", to_string(code)}, {"why", why}});
  self->send(s.setup.service, peer_refused{});
  write(self, frame(frame_kind::refusal, 0,
                    payload_of(wire_refusal{static_cast<uint8_t>(code), why})));
  self->quit();
}

void on_proof(session_pointer self, std::string_view payload) {
  auto& s = self->state;
  wire_proof proof;
  if (!read_payload(payload, proof) || proof.nonce.size() != nonce_bytes
      || !same_bytes(proof.mac, client_mac(s.setup.token, s.daemon_nonce, proof.nonce)))
    return drop(self, errc::wrong_token, "the proof is not of this daemon's token");
  s.proven = true;
  s.reader.set_limit(s.setup.max_bytes);
  write(self, frame(frame_kind::proven, 0,
                    payload_of(wire_proof{{}, daemon_mac(s.setup.token, s.daemon_nonce,
                                                         proof.nonce)})));
  self->send(s.setup.server, proven_atom::value);
}

/// Asks the service for `request`'s answer and frames it back as `answer`.
template <class Answer, class Request>
void ask(session_pointer self, uint64_t id, frame_kind answer, std::string_view payload) {
  Request request;
  if (!read_payload(payload, request))
    return drop(self, errc::bad_message, "a request that does not parse");
  if constexpr (std::is_same_v<Request, client_hello> || std::is_same_v<Request, status_request>)
    request.token = self->state.setup.token;  // the proof stood for it
  self->request(self->state.setup.service, caf::infinite, std::move(request))
      .then(
          [self, id, answer](Answer& reply) {
            if (!self->state.ended)
              write(self, frame(answer, id, payload_of(std::move(reply))));
          },
          [self, id](caf::error& error) {
            if (!self->state.ended)
              write(self, frame(frame_kind::refusal, id, payload_of(refusal_of(error))));
          });
}

void on_frame(session_pointer self, const frame_header& header, std::string_view payload) {
  auto& s = self->state;
  if (!s.proven) {
    if (header.kind != frame_kind::proof)
      return drop(self, errc::not_welcomed, "a request before the proof");
    return on_proof(self, payload);
  }
  switch (header.kind) {
    case frame_kind::hello:
      return ask<daemon_welcome, client_hello>(self, header.id, frame_kind::welcome, payload);
    case frame_kind::compile:
      return ask<compiled_plan, compile_request>(self, header.id, frame_kind::plan, payload);
    case frame_kind::agree:
      return ask<agreed, agree_request>(self, header.id, frame_kind::agreed, payload);
    case frame_kind::status:
      return ask<daemon_status, status_request>(self, header.id, frame_kind::status_reply,
                                                payload);
    case frame_kind::report: {
      client_report report;
      if (!read_payload(payload, report))
        return drop(self, errc::bad_message, "a report that does not parse");
      self->send(s.setup.service, std::move(report));
      return;
    }
    default:
      return drop(self, errc::bad_message, "a frame a client does not send");
  }
}

caf::behavior wire_session(session_pointer self, caf::io::connection_handle connection,
                           session_setup setup) {
  auto& s = self->state;
  s.setup = std::move(setup);
  s.connection = connection;
  s.peer = self->remote_addr(connection) + ":" + std::to_string(self->remote_port(connection));
  s.daemon_nonce = random_bytes(nonce_bytes);
  self->monitor(s.setup.service);
  self->set_down_handler([self](caf::down_msg&) { self->quit(); });
  write(self, frame(frame_kind::challenge, 0,
                    payload_of(wire_challenge{wire_protocol, s.daemon_nonce})));
  self->configure_read(connection, caf::io::receive_policy::exactly(s.reader.next_read()));
  // Anonymous: a message from the session to itself that arrives after it
  // ended keeps it alive for good in CAF 0.17.6 (its sender is the session;
  // LeakSanitizer found every session so).
  caf::delayed_anon_send(caf::actor_cast<caf::actor>(self), handshake_timeout,
                         deadline_atom::value);
  return {
    [self](const caf::io::new_data_msg& msg) {
      auto& s = self->state;
      if (s.ended)
        return;
      auto got = s.reader.take(msg.buf);
      if (got.kind == frame_reader::step::malformed)
        return drop(self, errc::bad_message, "not a frame of " + std::string(wire_protocol));
      if (got.kind == frame_reader::step::too_large)
        return drop(self, errc::too_busy,
                    "a frame of " + std::to_string(got.header.size) + " bytes, over "
                        + (s.proven ? "daemon.max_message_mb" : "the handshake's bound"));
      if (got.kind == frame_reader::step::frame)
        on_frame(self, got.header, got.payload);
      if (!s.ended)
        self->configure_read(s.connection,
                             caf::io::receive_policy::exactly(s.reader.next_read()));
    },
    [self](const caf::io::connection_closed_msg&) { self->quit(); },
    [self](deadline_atom) {
      if (!self->state.proven)
        drop(self, errc::not_welcomed, "no proof of the token within the handshake's time");
    },
  };
}

struct server_state {
  static inline const char* name = "gradd.wire_server";
  std::set<caf::actor> sessions;          ///< all, until they end
  std::set<caf::actor_addr> handshaking;  ///< sessions that have not proven the token yet
  uint64_t turned_away = 0;               ///< connections closed at the cap
};

using server_pointer = caf::stateful_actor<server_state, caf::io::broker>*;

caf::behavior wire_server(server_pointer self, caf::io::doorman_ptr doorman,
                          session_setup setup) {
  self->add_doorman(std::move(doorman));
  setup.server = caf::actor_cast<caf::actor>(self);
  self->set_down_handler([self](caf::down_msg& down) {
    auto& s = self->state;
    s.handshaking.erase(down.source);
    for (auto i = s.sessions.begin(); i != s.sessions.end(); ++i)
      if (i->address() == down.source) {
        s.sessions.erase(i);
        break;
      }
  });
  return {
    [self, setup](const caf::io::new_connection_msg& msg) {
      auto& s = self->state;
      if (s.handshaking.size() >= max_handshakes) {
        if (s.turned_away++ % 1000 == 0)
          log_event(setup.logging, log_level::warning, "connection_refused",
                    {{"why", "max_handshakes connections in their handshake"},
                     {"turned_away", s.turned_away}});
        self->close(msg.handle);
        return;
      }
      auto session = self->fork(wire_session, msg.handle, setup);
      self->monitor(session);
      s.handshaking.insert(session.address());
      s.sessions.insert(session);
    },
    [self](caf::get_atom) {
      return std::vector<caf::actor>(self->state.sessions.begin(), self->state.sessions.end());
    },
    [self](proven_atom) {
      self->state.handshaking.erase(caf::actor_cast<caf::actor_addr>(self->current_sender()));
    },
  };
}

} // namespace

caf::expected<wire_listener> serve_wire(caf::actor_system& system, const daemon_address& where,
                                        service_actor service, std::string token,
                                        const settings& config) {
  auto& middleman = system.middleman();
  auto doorman = middleman.backend().new_tcp_doorman(where.port, where.host.c_str(), true);
  if (!doorman)
    return doorman.error();
  auto port = (*doorman)->port();
  session_setup setup{std::move(service), std::move(token),
                      size_t{config.daemon.max_message_mb} << 20, config.logging.level, {}};
  auto server = middleman.spawn_broker(wire_server, std::move(*doorman), std::move(setup));
  return wire_listener{server, port};
}

} // namespace gradd::daemon
