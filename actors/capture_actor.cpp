// The capture stage: the compile recipe's first step (compiler/compile.hpp),
// lowering the captured node table to node ops.

#include "actors/capture_actor.hpp"

#include "compiler/lower.hpp"

#include <caf/all.hpp>

namespace gradd::actors {

capture_actor::behavior_type capture_stage(capture_actor::stateful_pointer<capture_state>,
                                           stage_setup setup, pass_pipeline_actor passes,
                                           registry_actor registry) {
  auto mine = std::make_shared<const stage_setup>(std::move(setup));
  return {
    [mine, passes, registry](capture_job& job) {
      auto shared = std::make_shared<capture_job>(std::move(job));
      mine->run_work([mine, passes, registry, shared] {
        try {
          mine->check_interruption(shared->graph_id);
          compiler::lower_to_node_ops(shared->ir);
          caf::anon_send(passes, pass_job{shared->graph_id, std::move(shared->ir)});
        } catch (...) {
          caf::anon_send(registry, stage_setup::failure(shared->graph_id, "capture stage"));
        }
      });
    },
  };
}

} // namespace gradd::actors
