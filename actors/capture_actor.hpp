#pragma once

// The capture stage: lowers a captured node table to node-level IR (stock
// order, gradient sums, hooks).
// The node table itself is read on the backward's own thread, the only time
// the live nodes are sure to exist (capture/capture_graph.hpp).

#include "actors/messages.hpp"
#include "actors/pass_pipeline_actor.hpp"
#include "actors/registry_actor.hpp"
#include "actors/stage_setup.hpp"

#include <caf/typed_actor.hpp>

namespace gradd::actors {

using capture_actor = caf::typed_actor<caf::reacts_to<capture_job>>;

struct capture_state {
  static inline const char* name = "gradd.capture";
};

capture_actor::behavior_type capture_stage(capture_actor::stateful_pointer<capture_state> self,
                                           stage_setup setup, pass_pipeline_actor passes,
                                           registry_actor registry);

} // namespace gradd::actors
