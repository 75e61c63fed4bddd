// The client end of the daemon's wire (see wire_client.hpp).

#include "actors/wire_client.hpp"

#include "actors/digest.hpp"
#include "actors/errors.hpp"
#include "actors/wire_frame.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <optional>
#include <unordered_map>
#include <vector>

namespace gradd::actors {

namespace {

struct wire_client_state {
  static inline const char* name = "gradd.wire_client";

  struct request_out {
    frame_kind answer;  ///< the kind its answer comes as
    caf::response_promise promise;
  };

  caf::io::connection_handle connection;
  std::string token;
  size_t max_bytes = 0;
  std::string client_nonce;
  std::string daemon_nonce;  ///< once challenged
  bool proven = false;       ///< the daemon proved it holds the token
  bool ended = false;        ///< failed: reads nothing more
  std::vector<std::vector<char>> waiting;  ///< frames written once challenged
  frame_reader reader{handshake_frame_bytes};
  uint64_t next_id = 1;
  std::unordered_map<uint64_t, request_out> out;
};

using client_pointer = caf::stateful_actor<wire_client_state, caf::io::broker>*;

void write(client_pointer self, const std::vector<char>& bytes) {
  self->write(self->state.connection, bytes.size(), bytes.data());
  self->flush(self->state.connection);
}

/// Writes `bytes`, or keeps them until the challenge came: the proof goes first.
void send_frame(client_pointer self, std::vector<char> bytes) {
  if (self->state.daemon_nonce.empty())
    self->state.waiting.push_back(std::move(bytes));
  else
    write(self, bytes);
}

/// Every request out fails with `error`, and the broker quits.
void fail(client_pointer self, const caf::error& error) {
  self->state.ended = true;
  auto out = std::move(self->state.out);
  self->state.out.clear();
  for (auto& [id, request] : out)
    request.promise.deliver(error);
  self->quit(error);
}

void broken(client_pointer self, const std::string& why) {
  fail(self, make_error(errc::bad_message, "gradd daemon: " + why));
}

template <class Request>
caf::response_promise request(client_pointer self, frame_kind kind, frame_kind answer,
                              Request message) {
  auto promise = self->make_response_promise();
  auto id = self->state.next_id++;
  self->state.out.emplace(id, wire_client_state::request_out{answer, promise});
  send_frame(self, frame(kind, id, payload_of(std::move(message))));
  return promise;
}

void on_challenge(client_pointer self, std::string_view payload) {
  auto& s = self->state;
  wire_challenge challenge;
  if (!read_payload(payload, challenge) || challenge.protocol != wire_protocol
      || challenge.nonce.size() != nonce_bytes)
    return broken(self, "speaks another protocol");
  s.daemon_nonce = challenge.nonce;
  write(self, frame(frame_kind::proof, 0,
                    payload_of(wire_proof{s.client_nonce,
                                          client_mac(s.token, s.daemon_nonce, s.client_nonce)})));
  for (auto& bytes : s.waiting)
    write(self, bytes);
  s.waiting.clear();
}

void on_proven(client_pointer self, std::string_view payload) {
  auto& s = self->state;
  wire_proof proof;
  if (!read_payload(payload, proof)
      || !same_bytes(proof.mac, daemon_mac(s.token, s.daemon_nonce, s.client_nonce)))
    return fail(self, make_error(errc::wrong_token,
                                 "the daemon at this address does not hold the token"));
  s.proven = true;
  s.reader.set_limit(s.max_bytes);
}

template <class Answer>
bool deliver(caf::response_promise& promise, std::string_view payload) {
  Answer answer;
  if (!read_payload(payload, answer))
    return false;
  promise.deliver(std::move(answer));
  return true;
}

void on_answer(client_pointer self, const frame_header& header, std::string_view payload) {
  auto& s = self->state;
  if (header.kind == frame_kind::refusal && header.id == 0) {
    wire_refusal refusal;  // why the daemon ends the connection
    if (!read_payload(payload, refusal))
      return broken(self, "sent a refusal that does not parse");
    return fail(self, make_error(static_cast<errc>(refusal.code), refusal.what));
  }
  if (!s.proven)
    return broken(self, "answered before proving it holds the token");
  auto found = s.out.find(header.id);
  if (found == s.out.end())
    return broken(self, "answered a request that was not asked");
  auto request = std::move(found->second);
  s.out.erase(found);
  bool read = false;
  if (header.kind == frame_kind::refusal) {
    wire_refusal refusal;
    read = read_payload(payload, refusal);
    if (read)
      request.promise.deliver(make_error(static_cast<errc>(refusal.code), refusal.what));
  } else if (header.kind != request.answer) {
    read = false;
  } else if (header.kind == frame_kind::welcome) {
    read = deliver<daemon_welcome>(request.promise, payload);
  } else if (header.kind == frame_kind::plan) {
    read = deliver<compiled_plan>(request.promise, payload);
  } else if (header.kind == frame_kind::agreed) {
    read = deliver<agreed>(request.promise, payload);
  } else if (header.kind == frame_kind::status_reply) {
    read = deliver<daemon_status>(request.promise, payload);
  }
  if (!read) {
    request.promise.deliver(make_error(errc::bad_message, "gradd daemon: a malformed answer"));
    broken(self, "sent a malformed answer");
  }
}

void on_frame(client_pointer self, const frame_header& header, std::string_view payload) {
  auto& s = self->state;
  if (s.daemon_nonce.empty()) {
    if (header.kind != frame_kind::challenge)
      return broken(self, "did not begin with its challenge");
    return on_challenge(self, payload);
  }
  if (header.kind == frame_kind::proven && !s.proven)
    return on_proven(self, payload);
  on_answer(self, header, payload);
}

caf::behavior wire_client(client_pointer self, caf::io::connection_handle connection,
                          std::string token, size_t max_bytes) {
  auto& s = self->state;
  s.connection = connection;
  s.token = std::move(token);
  s.max_bytes = max_bytes;
  s.client_nonce = random_bytes(nonce_bytes);
  self->configure_read(connection, caf::io::receive_policy::exactly(s.reader.next_read()));
  return {
    [self](const caf::io::new_data_msg& msg) {
      auto& s = self->state;
      auto got = s.reader.take(msg.buf);
      if (got.kind == frame_reader::step::malformed || got.kind == frame_reader::step::too_large)
        return broken(self, "sent a frame that is malformed or over daemon.max_message_mb");
      if (got.kind == frame_reader::step::frame)
        on_frame(self, got.header, got.payload);
      if (!s.ended)
        self->configure_read(s.connection,
                             caf::io::receive_policy::exactly(s.reader.next_read()));
    },
    [self](const caf::io::connection_closed_msg&) {
      fail(self, make_error(errc::disconnected, "the connection closed"));
    },
    [self](client_hello& hello) {
      hello.token.clear();  // the proof stands for it
      return request(self, frame_kind::hello, frame_kind::welcome, std::move(hello));
    },
    [self](compile_request& asked) {
      return request(self, frame_kind::compile, frame_kind::plan, std::move(asked));
    },
    [self](agree_request& asked) {
      return request(self, frame_kind::agree, frame_kind::agreed, std::move(asked));
    },
    [self](status_request& asked) {
      asked.token.clear();
      return request(self, frame_kind::status, frame_kind::status_reply, std::move(asked));
    },
    [self](client_report& report) {
      send_frame(self, frame(frame_kind::report, 0, payload_of(std::move(report))));
    },
  };
}

} // namespace

caf::expected<daemon_actor> connect_daemon(caf::actor_system& system,
                                           const daemon_address& address, std::string token,
                                           size_t max_bytes) {
  auto broker = system.middleman().spawn_client(wire_client, address.host, address.port,
                                                std::move(token), max_bytes);
  if (!broker)
    return broker.error();
  return caf::actor_cast<daemon_actor>(*broker);
}

namespace {

/// The connector's behavior (a function with arguments: CAF 0.17 spawns one
/// without them through a null pointer, which UBSan reports).
caf::behavior daemon_connector(caf::event_based_actor* self, std::string token,
                               size_t max_bytes) {
  return {
    [self, token, max_bytes](caf::connect_atom, const std::string& host,
                             uint16_t port) -> caf::result<caf::actor> {
      self->quit();
      auto daemon = connect_daemon(self->system(), {host, port}, token, max_bytes);
      if (!daemon)
        return daemon.error();
      return caf::actor_cast<caf::actor>(*daemon);
    },
  };
}

} // namespace

caf::actor spawn_daemon_connector(caf::actor_system& system, std::string token,
                                  size_t max_bytes) {
  return system.spawn<caf::detached>(daemon_connector, std::move(token), max_bytes);
}

} // namespace gradd::actors
