#pragma once

// The compile stage: turns verified IR into a plan on the TBB arena.

#include "actors/messages.hpp"
#include "actors/registry_actor.hpp"
#include "actors/stage_setup.hpp"

#include <caf/typed_actor.hpp>

namespace gradd::actors {

using compile_actor = caf::typed_actor<caf::reacts_to<compile_job>>;

struct compile_state {
  static inline const char* name = "gradd.compile";
};

compile_actor::behavior_type compile_stage(compile_actor::stateful_pointer<compile_state> self,
                                           stage_setup setup, registry_actor registry);

} // namespace gradd::actors
