// The pass-pipeline stage, the compile recipe's middle step
// (compiler/compile.hpp): the policy's pipeline (passes.pipeline, plus
// gradient_ready_schedule when passes.gradient_ready), verified after each
// pass and dumped to logging.ir_dump_dir. A graph a pass breaks never
// reaches the compile stage: it settles as failed, naming the pass and op.

#include "actors/pass_pipeline_actor.hpp"

#include "compiler/compile.hpp"

#include <caf/all.hpp>

namespace gradd::actors {

pass_pipeline_actor::behavior_type pass_pipeline_stage(
    pass_pipeline_actor::stateful_pointer<pass_pipeline_state>, stage_setup setup,
    compile_actor compile, registry_actor registry) {
  auto mine = std::make_shared<const stage_setup>(std::move(setup));
  return {
    [mine, compile, registry](pass_job& job) {
      auto shared = std::make_shared<pass_job>(std::move(job));
      mine->run_work([mine, compile, registry, shared] {
        const auto& config = mine->config;
        try {
          compiler::run_passes(shared->ir,
                               {config.passes.effective_pipeline(),
                                "graph_" + std::to_string(shared->graph_id),
                                config.logging.ir_dump_dir,
                                [&] { mine->check_interruption(shared->graph_id); }});
          caf::anon_send(compile, compile_job{shared->graph_id, std::move(shared->ir)});
        } catch (...) {
          caf::anon_send(registry, stage_setup::failure(shared->graph_id, "pass pipeline"));
        }
      });
    },
  };
}

} // namespace gradd::actors
