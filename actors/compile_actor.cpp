// The compile stage: the compile recipe's last step (compiler/compile.hpp),
// building the plan. It runs on the TBB arena and its result goes
// to the registry as a message; the actor itself never blocks.

#include "actors/compile_actor.hpp"

#include "compiler/plan.hpp"

#include <caf/all.hpp>

#include <thread>

namespace gradd::actors {

namespace {

/// The test knob compile.delay_ms: a compile that takes this long, and
/// stops as any compile does when interrupted (stage_setup::interruption).
void delay(const stage_setup& setup, uint64_t graph_id) {
  auto until = std::chrono::steady_clock::now()
               + std::chrono::milliseconds(setup.config.compile.delay_ms);
  while (std::chrono::steady_clock::now() < until) {
    setup.check_interruption(graph_id);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

} // namespace

compile_actor::behavior_type compile_stage(compile_actor::stateful_pointer<compile_state>,
                                           stage_setup setup, registry_actor registry) {
  auto mine = std::make_shared<const stage_setup>(std::move(setup));
  return {
    [mine, registry](compile_job& job) {
      auto shared = std::make_shared<compile_job>(std::move(job));
      mine->run_work([mine, registry, shared] {
        try {
          delay(*mine, shared->graph_id);
          mine->check_interruption(shared->graph_id);
          compile_result result;
          result.graph_id = shared->graph_id;
          result.plan = compiler::build_plan(shared->ir);
          result.ir = std::move(shared->ir);
          caf::anon_send(registry, std::move(result));
        } catch (...) {
          caf::anon_send(registry, stage_setup::failure(shared->graph_id, "compile stage"));
        }
      });
    },
  };
}

} // namespace gradd::actors
