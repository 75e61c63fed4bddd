#pragma once

// The daemon link: the pipeline's first stage in a process with a daemon
// configured (daemon.address, $GRADD_DAEMON). It sends each captured node
// table to `gradd daemon` and hands the plan that comes back to the
// registry, as if compiled here. Whenever the daemon cannot serve (absent,
// refusing, slow, dead, or a plan that does not fit), the job goes on
// without it, by daemon.fallback: to this process's own capture stage, or
// to the stock engine. Never waits for the daemon past daemon.timeout_ms,
// and tries a lost daemon again after daemon.retry_after_ms.

#include "actors/capture_actor.hpp"
#include "actors/daemon_feed.hpp"
#include "actors/daemon_protocol.hpp"
#include "actors/registry_actor.hpp"
#include "actors/stage_setup.hpp"

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gradd::actors {

/// Sent by the link to itself while requests are out: checks whether the
/// pipeline stops (the requests' own timeouts cover a slow daemon).
struct link_tick {};

/// Sent by the link to itself every second while connected: reports this
/// process's statistics to the daemon.
struct report_tick {};

/// From a backward of this process (pipeline::propose): this rank proposes
/// to switch graph `graph_id` to its held plan at backward `proposal`.
struct rank_proposal {
  uint64_t graph_id = 0;
  uint64_t proposal = 0;
};

} // namespace gradd::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gradd::actors::link_tick)  // within this process only
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gradd::actors::report_tick)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gradd::actors::rank_proposal)

namespace gradd::actors {

using daemon_link_actor = caf::typed_actor<caf::reacts_to<capture_job>, caf::reacts_to<link_tick>,
                                           caf::reacts_to<report_tick>, caf::reacts_to<rank_proposal>>;

struct daemon_link_state {
  static inline const char* name = "gradd.daemon_link";

  // Not an aggregate: CAF constructs a state from the actor's pointer where
  // it can, which would make `daemon` a handle to the link itself.
  daemon_link_state() = default;

  daemon_actor daemon;  ///< welcomed; invalid while there is none
  uint32_t welcomes = 0;  ///< daemons welcomed so far: `daemon` is the last of them
  bool connecting = false;
  bool ticking = false;
  bool reporting = false;
  std::chrono::steady_clock::time_point retry_at{};
  std::vector<capture_job> queued;  ///< arrived while connecting
  std::unordered_map<uint64_t, std::shared_ptr<capture_job>> out;  ///< sent, by graph id
  std::string said;  ///< the last problem logged, so each is said once
  std::function<statistics_fields()> own_statistics;  ///< what it reports
  /// Graphs whose plans are held for an agreement: the key they are agreed
  /// under, how many proposals this rank made, those the daemon has not
  /// answered yet, by their number, and the welcome of the daemon the last
  /// one went to (0: none went).
  struct held_plan {
    uint64_t key = 0;
    uint32_t proposals = 0;
    std::map<uint32_t, uint64_t> unanswered;
    uint32_t proposed_to = 0;
  };
  std::unordered_map<uint64_t, held_plan> held;
};

/// Makes `service`, a compile service in this process (spawned by a host
/// program in its actor system, daemon/compile_service.hpp), the daemon of
/// every pipeline started from now on, in place of one over the network;
/// `token` is the one it was spawned with. An invalid handle turns it off.
void compile_with(daemon_actor service, std::string token);

/// The compile service of compile_with, if one is set.
std::optional<std::pair<daemon_actor, std::string>> host_compile_service();

daemon_link_actor::behavior_type daemon_link_stage(
    daemon_link_actor::stateful_pointer<daemon_link_state> self, stage_setup setup,
    capture_actor capture, registry_actor registry, daemon_feed* feed,
    std::function<statistics_fields()> own_statistics);

} // namespace gradd::actors
