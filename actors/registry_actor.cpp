// The registry stage. It is the only writer of a graph's final state, so
// the table's readers (every backward) see a plan appear exactly once.

#include "actors/registry_actor.hpp"

#include "actors/plan_store.hpp"
#include "config/log.hpp"

#include <caf/all.hpp>

namespace gradd::actors {

namespace {

using registry_pointer = registry_actor::stateful_pointer<registry_state>;

/// Settles `result` in the plan table, counting a finished compile first: a
/// sync-mode backward wakes when its plan lands and may read the statistics
/// at once. A result interrupted by a stop, or whose graph reset() dropped
/// meanwhile, is dropped uncounted.
void settle(const stage_setup& setup, compile_result& result, published_counts& counts) {
  const auto& config = setup.config;
  auto id = std::to_string(result.graph_id);
  auto claimed_at = setup.sink->pending_since(result.graph_id);
  if (!claimed_at || is(result.error, errc::cancelled) || (!result.ok() && setup.is_stopping())) {
    setup.sink->drop(result.graph_id);  // compiles again when next seen
    log(config.logging.level, log_level::debug,
        "graph " + id + " dropped: " + (result.ok() ? "reset" : render(result.error)));
    return;
  }
  counts.compiles.fetch_add(1);
  auto elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now()
                                                           - *claimed_at)
                     .count();
  if (result.ok() && elapsed <= config.compile.timeout_ms) {
    auto summary = compiler::to_string(result.plan);
    if (!config.cache.dir.empty()) {
      auto error = store_plan(config.cache.dir, setup.sink->portable_key(result.graph_id),
                              {result.ir, result.plan});
      if (!error.empty())
        log(config.logging.level, log_level::warning,
            "graph " + id + " not kept in cache.dir: " + error);
    }
    setup.sink->publish(result.graph_id, std::move(result.ir), std::move(result.plan), elapsed,
                        config.cache.max_plans);
    log(config.logging.level, log_level::info,
        "graph " + id + " compiled in " + std::to_string(elapsed) + " ms: " + summary);
    return;
  }
  auto why = result.ok() ? "took " + std::to_string(elapsed) + " ms, over compile.timeout_ms"
                         : render(result.error);
  auto retry_at = config.fallback.on_compile_error == compile_error_policy::never_retry
                      ? std::chrono::steady_clock::time_point::max()
                      : std::chrono::steady_clock::now()
                            + std::chrono::milliseconds(config.fallback.retry_after_ms);
  setup.sink->fail(result.graph_id, retry_at);
  log(config.logging.level, log_level::warning,
      "graph " + id + " failed to compile, the stock engine serves it: " + why);
}

/// Answers the requests whose graphs have all settled.
void answer_settled(registry_pointer self, const published_counts& counts) {
  auto& waiting = self->state.waiting;
  auto now = counts.load();
  auto due = waiting.upper_bound(now.settled);
  for (auto it = waiting.begin(); it != due; ++it)
    it->second.deliver(now);
  waiting.erase(waiting.begin(), due);
}

} // namespace

registry_actor::behavior_type registry_stage(registry_pointer self, stage_setup setup,
                                             published_counts* counts) {
  return {
    [self, setup, counts](compile_result& result) {
      settle(setup, result, *counts);
      // Counted before the waiting requests hear it, so that statistics are
      // current by the time a waiting backward wakes.
      counts->settled.fetch_add(1);
      answer_settled(self, *counts);
    },
    [self, counts](settled_request& request) {
      auto promise = self->make_response_promise<compile_counts>();
      self->state.waiting.emplace(request.submitted, promise);
      answer_settled(self, *counts);
      return promise;
    },
  };
}

} // namespace gradd::actors
