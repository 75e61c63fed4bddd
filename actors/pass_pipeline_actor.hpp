#pragma once

// The pass-pipeline stage: runs the graph passes over node-level IR and
// verifies the result, on the TBB arena.

#include "actors/compile_actor.hpp"
#include "actors/messages.hpp"
#include "actors/registry_actor.hpp"
#include "actors/stage_setup.hpp"

#include <caf/typed_actor.hpp>

namespace gradd::actors {

using pass_pipeline_actor = caf::typed_actor<caf::reacts_to<pass_job>>;

struct pass_pipeline_state {
  static inline const char* name = "gradd.passes";
};

pass_pipeline_actor::behavior_type pass_pipeline_stage(
    pass_pipeline_actor::stateful_pointer<pass_pipeline_state> self, stage_setup setup,
    compile_actor compile, registry_actor registry);

} // namespace gradd::actors
