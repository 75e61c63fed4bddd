// The capture stage.

#include "actors/capture_actor.hpp"

#include "compiler/lower.hpp"

#include <caf/all.hpp>

namespace gradd::actors {

capture_actor::behavior_type capture_stage(capture_actor::stateful_pointer<capture_state>,
                                           stage_context* context, pass_pipeline_actor passes,
                                           registry_actor registry) {
  return {
    [context, passes, registry](capture_job& job) {
      auto shared = std::make_shared<capture_job>(std::move(job));
      context->run_on_arena([context, passes, registry, shared] {
        try {
          context->check_interruption(shared->graph_id);
          compiler::lower_to_node_ops(shared->ir);
          caf::anon_send(passes, pass_job{shared->graph_id, std::move(shared->ir)});
        } catch (const std::exception& e) {
          caf::anon_send(registry,
                         compile_result::failure(shared->graph_id, "capture stage", e.what()));
        }
      });
    },
  };
}

} // namespace gradd::actors
