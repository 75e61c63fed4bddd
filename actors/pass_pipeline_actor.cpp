// The pass-pipeline stage. Today its pipeline is the verifier alone: the
// node-level program comes out of lowering in the stock engine's order, which
// is what the plan must keep (compiler/stock_order.hpp). The seed's passes
// plug in here (issue: pass pipeline). A broken graph never reaches the
// compile stage: it settles as failed, naming the op at fault.

#include "actors/pass_pipeline_actor.hpp"

#include <caf/all.hpp>

#include <sstream>

namespace gradd::actors {

pass_pipeline_actor::behavior_type pass_pipeline_stage(
    pass_pipeline_actor::stateful_pointer<pass_pipeline_state>, stage_context* context,
    compile_actor compile, registry_actor registry) {
  return {
    [context, compile, registry](pass_job& job) {
      auto shared = std::make_shared<pass_job>(std::move(job));
      context->run_on_arena([compile, registry, shared] {
        std::ostringstream why;
        if (compiler::verify(shared->ir, &why)) {
          compile_result failed;
          failed.graph_id = shared->graph_id;
          failed.error = "pass pipeline: broken graph: " + why.str();
          caf::anon_send(registry, std::move(failed));
          return;
        }
        caf::anon_send(compile, compile_job{shared->graph_id, std::move(shared->ir)});
      });
    },
  };
}

} // namespace gradd::actors
