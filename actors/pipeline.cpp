// The pipeline's lifecycle (CAF-0.17.md, section 1): one CAF worker with
// moderate polling off (latency), a TBB arena sized by the policy, stages
// spawned back to front so each knows the next. Stopping follows the order
// that leaves nothing dangling: refuse new work, let in-flight graphs settle
// (their TBB tasks finish before they message the registry), drop what is
// still pending, then exit the actors and wait for them.

#include "actors/pipeline.hpp"

#include "actors/capture_actor.hpp"
#include "actors/compile_actor.hpp"
#include "actors/pass_pipeline_actor.hpp"
#include "actors/registry_actor.hpp"
#include "actors/stage_context.hpp"
#include "actors/type_ids.hpp"

#include <caf/all.hpp>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>

#include <optional>

namespace gradd::actors {

namespace {

caf::actor_system_config make_config() {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", 1);
  cfg.set("work-stealing.moderate-poll-attempts", 0);
  cfg.add_message_types<caf::id_block::gradd>();
  return cfg;
}

} // namespace

struct pipeline::impl {
  impl(const settings& config, engine::detail::plan_table& table)
      : arena_threads(static_cast<int>(config.compile.threads)),
        parallelism(arena_threads + 1 > tbb::info::default_concurrency()
                        ? std::make_optional<tbb::global_control>(
                            tbb::global_control::max_allowed_parallelism, arena_threads + 1)
                        : std::nullopt),
        arena(arena_threads, 0), cfg(make_config()), system(cfg) {
    context.config = config;
    context.table = &table;
    context.arena = &arena;
    registry = system.spawn(registry_stage, &context);
    compile = system.spawn(compile_stage, &context, registry);
    passes = system.spawn(pass_pipeline_stage, &context, compile, registry);
    capture = system.spawn(capture_stage, &context, passes, registry);
  }

  int arena_threads;
  // TBB's global pool has cores - 1 workers; an arena wider than that needs
  // a larger pool (CAF-0.17.md, section 4, "2-core trap").
  std::optional<tbb::global_control> parallelism;
  tbb::task_arena arena;
  stage_context context;
  caf::actor_system_config cfg;
  caf::actor_system system;
  registry_actor registry;
  compile_actor compile;
  pass_pipeline_actor passes;
  capture_actor capture;
  bool stopped = false;
};

pipeline::pipeline(const settings& config, engine::detail::plan_table& table)
    : impl_(std::make_unique<impl>(config, table)) {}

pipeline::~pipeline() {
  stop();
}

bool pipeline::submit(uint64_t graph_id, compiler::graph node_table) {
  auto& context = impl_->context;
  if (context.stopping.load())
    return false;
  context.in_flight.fetch_add(1);
  caf::anon_send(impl_->capture, capture_job{graph_id, std::move(node_table)});
  return true;
}

bool pipeline::wait_idle(std::chrono::milliseconds timeout) {
  auto& context = impl_->context;
  std::unique_lock lock(context.idle_mutex);
  return context.idle.wait_for(lock, timeout, [&] { return context.in_flight.load() == 0; });
}

uint64_t pipeline::in_flight() const noexcept {
  return impl_->context.in_flight.load();
}

uint64_t pipeline::finished() const noexcept {
  return impl_->context.finished.load();
}

void pipeline::stop() {
  auto& i = *impl_;
  if (i.stopped)
    return;
  i.stopped = true;
  i.context.stopping = true;
  // Settling cannot hang: building a plan takes bounded time, and the test
  // delay ends once stopping is set.
  while (!wait_idle(std::chrono::seconds(1)))
    ;
  i.context.table->drop_pending();
  caf::anon_send_exit(i.capture, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(i.passes, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(i.compile, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(i.registry, caf::exit_reason::user_shutdown);
  caf::scoped_actor self{i.system};
  self->wait_for(i.capture, i.passes, i.compile, i.registry);
}

} // namespace gradd::actors
