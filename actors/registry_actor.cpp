// The registry stage. It is the only writer of a record's final state, so
// the table's readers (every backward) see a plan appear exactly once.

#include "actors/registry_actor.hpp"

#include "actors/plan_store.hpp"
#include "config/log.hpp"

#include <caf/all.hpp>

namespace gradd::actors {

registry_actor::behavior_type registry_stage(registry_actor::stateful_pointer<registry_state>,
                                             stage_context* context) {
  return {
    [context](compile_result& result) {
      auto& config = context->config;
      auto record = context->table->record(result.graph_id);
      if (!record || (!result.ok && context->stopping.load())) {
        // Dropped by reset(), or interrupted by a stop: not a finished
        // compile, and the structure compiles again when next seen.
        if (record)
          context->table->drop(*record);
        log(config.logging.level, log_level::debug,
            "graph " + std::to_string(result.graph_id) + " dropped: " + result.error);
      } else {
        context->finished.fetch_add(1);
        record->compiles.fetch_add(1);
        auto elapsed = std::chrono::duration<double, std::milli>(
                           std::chrono::steady_clock::now() - record->claimed_at)
                           .count();
        bool in_time = elapsed <= config.compile.timeout_ms;
        if (result.ok && in_time) {
          auto summary = compiler::to_string(result.plan);
          auto compiled = std::make_shared<engine::detail::compiled_graph>();
          compiled->ir = std::move(result.ir);
          compiled->plan = std::move(result.plan);
          if (!config.cache.dir.empty()) {
            auto error = store_plan(config.cache.dir, record->portable_key,
                                    {compiled->ir, compiled->plan});
            if (!error.empty())
              log(config.logging.level, log_level::warning,
                  "graph " + std::to_string(result.graph_id) + " not kept in cache.dir: " + error);
          }
          context->table->publish(*record, std::move(compiled), elapsed,
                                  config.cache.max_plans);
          log(config.logging.level, log_level::info,
              "graph " + std::to_string(result.graph_id) + " compiled in "
                  + std::to_string(elapsed) + " ms: " + summary);
        } else {
          auto why = result.ok ? "took " + std::to_string(elapsed) + " ms, over compile.timeout_ms"
                               : result.error;
          auto retry_at = config.fallback.on_compile_error == compile_error_policy::never_retry
                              ? std::chrono::steady_clock::time_point::max()
                              : std::chrono::steady_clock::now()
                                    + std::chrono::milliseconds(config.fallback.retry_after_ms);
          context->table->fail(*record, fallback_reason::compile_error, retry_at);
          log(config.logging.level, log_level::warning,
              "graph " + std::to_string(result.graph_id)
                  + " failed to compile, the stock engine serves it: " + why);
        }
      }
      context->job_settled();
    },
  };
}

} // namespace gradd::actors
