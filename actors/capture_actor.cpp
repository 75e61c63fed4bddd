// The capture stage.

#include "actors/capture_actor.hpp"

#include "compiler/lower.hpp"
#include "config/log.hpp"

#include <caf/all.hpp>

#include <filesystem>
#include <fstream>

namespace gradd::actors {

namespace {

void dump_ir(const stage_context& context, uint64_t graph_id, const compiler::graph& ir) {
  const auto& dir = context.config.logging.ir_dump_dir;
  if (dir.empty())
    return;
  std::error_code ignored;
  std::filesystem::create_directories(dir, ignored);
  auto path = std::filesystem::path(dir) / ("graph_" + std::to_string(graph_id) + ".capture.txt");
  std::ofstream out(path);
  out << ir;
  if (!out)
    log(context.config.logging.level, log_level::warning,
        "cannot write the IR dump " + path.string());
}

} // namespace

capture_actor::behavior_type capture_stage(capture_actor::stateful_pointer<capture_state>,
                                           stage_context* context, pass_pipeline_actor passes,
                                           registry_actor registry) {
  return {
    [context, passes, registry](capture_job& job) {
      auto shared = std::make_shared<capture_job>(std::move(job));
      context->run_on_arena([context, passes, registry, shared] {
        try {
          compiler::lower_to_node_ops(shared->ir);
          dump_ir(*context, shared->graph_id, shared->ir);
          caf::anon_send(passes, pass_job{shared->graph_id, std::move(shared->ir)});
        } catch (const std::exception& e) {
          compile_result failed;
          failed.graph_id = shared->graph_id;
          failed.error = std::string("capture stage: ") + e.what();
          caf::anon_send(registry, std::move(failed));
        }
      });
    },
  };
}

} // namespace gradd::actors
