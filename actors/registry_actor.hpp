#pragma once

// The registry stage: settles each graph in the plan table (ready or failed),
// evicts beyond cache.max_plans, and logs what happened.

#include "actors/messages.hpp"
#include "actors/stage_context.hpp"

#include <caf/typed_actor.hpp>

namespace gradd::actors {

using registry_actor = caf::typed_actor<caf::reacts_to<compile_result>>;

struct registry_state {
  static inline const char* name = "gradd.registry";
};

registry_actor::behavior_type registry_stage(registry_actor::stateful_pointer<registry_state> self,
                                             stage_context* context);

} // namespace gradd::actors
