#pragma once

// The registry stage: settles each graph in the plan table (ready, failed,
// or dropped), keeps cache.dir, logs what happened, and owns the pipeline's
// counts. A request for the counts is answered once the graphs submitted
// before it have settled: that is how wait_for_compiles waits.

#include "actors/messages.hpp"
#include "actors/stage_setup.hpp"

#include <caf/stateful_actor.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include <atomic>
#include <cstdint>
#include <map>

namespace gradd::actors {

using registry_actor = caf::typed_actor<caf::reacts_to<compile_result>,
                                        caf::replies_to<settled_request>::with<compile_counts>>;

/// The registry's counts. Only the registry writes them; readers that are
/// not actors (gradd::stats()) load them, actors ask (settled_request).
struct published_counts {
  std::atomic<uint64_t> settled{0};   ///< graphs settled, dropped ones included
  std::atomic<uint64_t> compiles{0};  ///< of those, compiles that finished

  compile_counts load() const { return {settled.load(), compiles.load()}; }
};

struct registry_state {
  static inline const char* name = "gradd.registry";

  registry_state() = default;  // not an aggregate (CAF would build it from the actor)

  /// Requests waiting for `submitted` graphs to settle, by that number.
  std::multimap<uint64_t, caf::typed_response_promise<compile_counts>> waiting;
};

registry_actor::behavior_type registry_stage(registry_actor::stateful_pointer<registry_state> self,
                                             stage_setup setup, published_counts* counts);

} // namespace gradd::actors
