#pragma once

// The daemon's service: the one actor `gradd daemon` publishes, and what a
// host program spawns in its own actor system (examples/host_actor_system.cpp). It welcomes
// clients that present the token and run the same gradd and torch, compiles
// each structure once for all of them (a request for a structure being
// compiled waits for that compile; a compiled one is answered at once),
// keeps plans in memory (cache.max_plans) and in cache.dir, and refuses
// what goes past its bounds (daemon.max_*) with a gradd error, logged. The
// compiles run on a TBB arena; the actor only keeps the books.

#include "actors/daemon_protocol.hpp"
#include "gradd/settings.hpp"

#include <caf/actor_addr.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>
#include <oneapi/tbb/task_arena.h>

#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace gradd::daemon {

/// A compile (or a load from cache.dir) done on the arena, back to the service.
struct compile_finished {
  uint64_t key = 0;
  std::optional<actors::compiled_plan> plan;  ///< empty when it failed
  std::string error;
  double ms = 0;
};

/// One agreement: a job (its store's address and attempt) and a structure.
using agreement_id = std::tuple<std::string, uint32_t, uint64_t>;

/// An agreement across machines, back from its store exchange.
struct machines_agreed {
  agreement_id id;
  uint64_t round = 0;
  std::optional<uint64_t> serve_from;  ///< empty when the exchange failed
  std::string error;
};

/// From `gradd daemon`'s main thread: a new, validated policy (SIGHUP).
struct reload {
  settings config;
};

/// From `gradd daemon`'s main thread: refuse new work, finish the compiles
/// running, then quit (SIGTERM).
struct drain {};

/// From the wire (wire_server.hpp): a connection dropped before its client
/// was welcomed, counted with the refusals.
struct peer_refused {};

} // namespace gradd::daemon

// Messages within the daemon's process only: never serialized.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gradd::daemon::compile_finished)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gradd::daemon::machines_agreed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gradd::daemon::reload)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gradd::daemon::drain)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gradd::daemon::peer_refused)

namespace gradd::daemon {

using service_actor = actors::daemon_actor::extend<
    caf::reacts_to<compile_finished>, caf::reacts_to<machines_agreed>, caf::reacts_to<reload>,
    caf::reacts_to<drain>, caf::reacts_to<peer_refused>>;

struct service_state {
  static inline const char* name = "gradd.daemon";

  struct client {
    actors::client_status status;
    uint32_t waiting = 0;  ///< its compile requests not answered yet
  };

  struct waiter {
    caf::typed_response_promise<actors::compiled_plan> promise;
    caf::actor_addr client;
  };

  /// One structure under one pass pipeline and sequence order.
  struct entry {
    compiler::graph table;  ///< the table of the request that started it
    std::optional<actors::compiled_plan> plan;
    std::vector<waiter> waiters;  ///< while it compiles
    std::list<uint64_t>::iterator used;  ///< its key in `recency`, once compiled
  };

  /// The proposals of one job's ranks on this machine for one structure,
  /// until all came and, on several machines, the store exchange answered.
  struct agreement {
    /// Each rank's latest proposal, and the promise of its answer.
    std::map<caf::actor_addr, std::pair<uint64_t, caf::typed_response_promise<actors::agreed>>>
        proposals;
    uint32_t machine = 0;                ///< this machine's index in the job
    uint32_t machines = 1;               ///< the job's, as its ranks say
    std::optional<uint64_t> exchanging;  ///< the round in the job's store
    std::optional<uint64_t> last_round;  ///< the largest the previous round found
    uint32_t rounds = 0;                 ///< store rounds this agreement ran
  };

  settings config;
  std::string token;
  tbb::task_arena* arena = nullptr;
  std::map<caf::actor_addr, client> clients;
  uint64_t next_client = 1;
  std::unordered_map<uint64_t, entry> entries;
  std::list<uint64_t> recency;  ///< keys of compiled entries, least recently used first
  std::map<agreement_id, agreement> agreements;
  /// Agreements reached: a rank's proposal renewed after the answer (it
  /// crossed the answer on its way) hears the same index.
  std::map<agreement_id, uint64_t> agreed;
  std::map<agreement_id, uint64_t> store_rounds;  ///< exchanges begun per agreement id
  std::vector<actors::compile_listener> listeners;
  actors::daemon_status counts;
  bool draining = false;
};

using service_pointer = service_actor::stateful_pointer<service_state>;

service_actor::behavior_type compile_service(service_pointer self, settings config,
                                             std::string token, tbb::task_arena* arena);

} // namespace gradd::daemon
