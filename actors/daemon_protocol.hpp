#pragma once

// What a training process and `gradd daemon` say to each other, over the
// daemon's wire (wire_frame.hpp) or, in a host program, as messages to the
// compile service itself (docs/design.md, "The daemon"). The field lists
// are the wire format: nothing checks a schema, so `wire_protocol` changes
// with any of them, and the hello carries gradd's and torch's versions.
// Refusals are gradd errors (errors.hpp).

#include "actors/errors.hpp"
#include "actors/ir_inspect.hpp"

#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace gradd::actors {

/// The first request of a connection.
struct client_hello {
  std::string token;          ///< the daemon's token file's content
  std::string gradd_version;
  std::string torch_version;
  int32_t pid = 0;
  int32_t rank = -1;          ///< $RANK, where a launcher set it
};

struct daemon_welcome {
  uint64_t client_id = 0;
  /// The daemon's cache.dir, absolute ("" for none): on the daemon's own
  /// machine a client loads the plans kept there at a miss, without asking.
  std::string cache_dir;
};

/// A captured node table to compile under the pass pipeline `passes`
/// (settings::passes_section::effective_pipeline()).
struct compile_request {
  std::string passes;
  compiler::graph table;
};

/// How the daemon came by a plan.
enum class plan_source : uint8_t {
  compiled,  ///< compiled for this request
  shared,    ///< another client's compile of the same structure, waited for
  cached,    ///< compiled earlier, kept in memory
  disk,      ///< kept in the daemon's cache.dir by an earlier daemon
};

std::string to_string(plan_source source);

struct compiled_plan {
  compiler::graph ir;
  compiler::plan plan;
  plan_source source = plan_source::compiled;
};

/// The key the daemon files `request`'s plan under: its structure under its
/// passes, and the order of its sequence numbers (compiler/portable_key.hpp).
uint64_t request_key(const compile_request& request);

/// request_key of a request for `table` under `passes`, without building it.
uint64_t request_key(const std::string& passes, const compiler::graph& table);

/// A rank's proposal of the backward index (of one structure, counted on
/// this rank) from which its plan serves; a rank proposes again while it
/// has no answer (Note [Agreement across ranks]). Once the job's ranks on
/// this machine have all proposed, the daemon takes the largest of each
/// rank's latest proposal; on several machines, the largest of every
/// machine's, exchanged through the job's c10d TCPStore
/// (daemon/store_exchange.hpp). Every proposal hears it.
struct agree_request {
  std::string job;           ///< MASTER_ADDR:MASTER_PORT, where the job's store is
  uint32_t attempt = 0;      ///< $TORCHELASTIC_RESTART_COUNT: a restarted job agrees anew
  uint32_t local_ranks = 0;  ///< the job's ranks on this machine
  uint32_t machine = 0;      ///< this machine's index in the job
  uint32_t machines = 1;     ///< the job's machines
  uint64_t key = 0;          ///< request_key of the structure's compile request
  uint64_t proposal = 0;
  /// 0: this rank's first proposal for the structure's plan, which a new
  /// agreement starts from; later ones renew it and are answered at once
  /// once the job has agreed.
  uint32_t retry = 0;
};

struct agreed {
  /// The answer to a proposal the same rank renewed before the job agreed:
  /// the later proposal, taken in instead, hears the answer.
  static constexpr uint64_t superseded = 0;
  /// The answer to a renewal that came during the store exchange: not taken
  /// in (the answer may be earlier), and heard by the rank's earlier proposal.
  static constexpr uint64_t exchanging = UINT64_MAX;
  uint64_t serve_from = superseded;
};

/// A client's own statistics (gradd::fields), sent every second while it is
/// connected, for `gradd status` to show per rank.
struct client_report {
  std::vector<std::string> names;
  std::vector<uint64_t> values;
};

/// What the daemon tells its subscribers after each compile (or load).
struct compile_event {
  uint64_t key = 0;      ///< request_key of the structure
  bool ok = false;
  plan_source source = plan_source::compiled;  ///< compiled or disk
  uint32_t nodes = 0;
  uint32_t waiters = 0;  ///< requests it answered
  double ms = 0;
  std::string error;     ///< when it failed
};

/// An actor that hears compile events.
using compile_listener = caf::typed_actor<caf::reacts_to<compile_event>>;

/// Adds `listener` to the daemon's subscribers, until it terminates; from a
/// welcomed client only.
struct subscribe {
  compile_listener listener;
};

/// Asks for the daemon's statistics; the token as in the hello.
struct status_request {
  std::string token;
};

struct client_status {
  uint64_t id = 0;
  int32_t pid = 0;
  int32_t rank = -1;
  uint64_t requests = 0;
  uint64_t served_without_compile = 0;  ///< shared, cached or disk
  client_report report;                 ///< its latest
};

struct daemon_status {
  std::string gradd_version;
  std::string torch_version;
  uint64_t clients = 0;            ///< connected now
  uint64_t requests = 0;           ///< compile requests answered or waiting
  uint64_t compiles = 0;           ///< compiles run
  uint64_t compiles_saved = 0;     ///< requests served without a compile
  uint64_t disk_loads = 0;         ///< plans read from cache.dir
  uint64_t failed = 0;             ///< compiles that failed
  uint64_t refused = 0;            ///< hellos and requests refused
  uint64_t structures = 0;         ///< plans held in memory
  uint64_t in_flight = 0;          ///< compiles running
  uint64_t agreements = 0;         ///< structures all ranks of a job agreed to switch together
  uint64_t store_agreements = 0;   ///< of those, agreed with other machines through the job's store
  std::vector<client_status> per_client;
};

/// The daemon's interface: what a client may ask.
using daemon_actor = caf::typed_actor<caf::replies_to<client_hello>::with<daemon_welcome>,
                                      caf::replies_to<compile_request>::with<compiled_plan>,
                                      caf::replies_to<agree_request>::with<agreed>,
                                      caf::reacts_to<client_report>,
                                      caf::reacts_to<subscribe>,
                                      caf::replies_to<status_request>::with<daemon_status>>;

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, client_hello& x) {
  return f(caf::meta::type_name("gradd.client_hello"), x.token, x.gradd_version, x.torch_version,
           x.pid, x.rank);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, daemon_welcome& x) {
  return f(caf::meta::type_name("gradd.daemon_welcome"), x.client_id, x.cache_dir);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, compile_request& x) {
  return f(caf::meta::type_name("gradd.compile_request"), x.passes, x.table);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, compiled_plan& x) {
  return f(caf::meta::type_name("gradd.compiled_plan"), x.ir, x.plan, x.source);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, agree_request& x) {
  return f(caf::meta::type_name("gradd.agree_request"), x.job, x.attempt, x.local_ranks, x.machine,
           x.machines, x.key, x.proposal, x.retry);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, agreed& x) {
  return f(caf::meta::type_name("gradd.agreed"), x.serve_from);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, client_report& x) {
  return f(caf::meta::type_name("gradd.client_report"), x.names, x.values);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, compile_event& x) {
  return f(caf::meta::type_name("gradd.compile_event"), x.key, x.ok, x.source, x.nodes,
           x.waiters, x.ms, x.error);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, subscribe& x) {
  return f(caf::meta::type_name("gradd.subscribe"), x.listener);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, status_request& x) {
  return f(caf::meta::type_name("gradd.status_request"), x.token);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, client_status& x) {
  return f(caf::meta::type_name("gradd.client_status"), x.id, x.pid, x.rank, x.requests,
           x.served_without_compile, x.report);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, daemon_status& x) {
  return f(caf::meta::type_name("gradd.daemon_status"), x.gradd_version, x.torch_version,
           x.clients, x.requests, x.compiles, x.compiles_saved, x.disk_loads, x.failed,
           x.refused, x.structures, x.in_flight, x.agreements, x.store_agreements,
           x.per_client);
}

} // namespace gradd::actors
