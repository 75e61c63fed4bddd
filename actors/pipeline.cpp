// The pipeline's lifecycle (CAF-0.17.md, section 1).
//
// The actor system is the process's (actor_system.hpp). Each pipeline
// spawns its stages into it, back to front so each knows the next, with a
// TBB arena sized by the policy. Stopping
// follows the order that leaves nothing dangling: refuse new work, interrupt
// the graphs in flight and let them settle (their TBB tasks finish before
// they message the registry), drop what is still pending, then exit the
// stages and wait for them.

#include "actors/pipeline.hpp"

#include "actors/actor_system.hpp"
#include "actors/capture_actor.hpp"
#include "actors/compile_actor.hpp"
#include "actors/daemon_link.hpp"
#include "actors/pass_pipeline_actor.hpp"
#include "actors/registry_actor.hpp"
#include "actors/stage_context.hpp"
#include "config/daemon_address.hpp"
#include "config/log.hpp"

#include <caf/all.hpp>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>

#include <optional>

namespace gradd::actors {

struct pipeline::impl {
  impl(const settings& config, engine::detail::plan_table& table, daemon_counters& counters,
       std::function<statistics_fields()> own_statistics)
      : arena_threads(static_cast<int>(config.compile.threads)),
        parallelism(arena_threads + 1 > tbb::info::default_concurrency()
                        ? std::make_optional<tbb::global_control>(
                            tbb::global_control::max_allowed_parallelism, arena_threads + 1)
                        : std::nullopt),
        arena(arena_threads, 0) {
    context.config = config;
    context.table = &table;
    context.arena = &arena;
    context.counters = &counters;
    context.own_statistics = std::move(own_statistics);
    auto& system = process_actor_system();
    registry = system.spawn(registry_stage, &context);
    compile = system.spawn(compile_stage, &context, registry);
    passes = system.spawn(pass_pipeline_stage, &context, compile, registry);
    capture = system.spawn(capture_stage, &context, passes, registry);
    if (configured_daemon(config) || host_compile_service())
      link = system.spawn(daemon_link_stage, &context, capture, registry);
    intake = link ? caf::actor_cast<capture_actor>(link) : capture;
  }

  int arena_threads;
  // TBB's global pool has cores - 1 workers; an arena wider than that needs
  // a larger pool (CAF-0.17.md, section 4, "2-core trap").
  std::optional<tbb::global_control> parallelism;
  tbb::task_arena arena;
  stage_context context;
  registry_actor registry;
  compile_actor compile;
  pass_pipeline_actor passes;
  capture_actor capture;
  daemon_link_actor link;  ///< with a daemon configured
  capture_actor intake;    ///< where submit sends: the link, else capture
  /// Orders submit against stop: no job enters once stopping is set.
  std::mutex intake_mutex;
  std::mutex stop_mutex;
  bool stopped = false;
  bool settled = true;
};

pipeline::pipeline(const settings& config, engine::detail::plan_table& table,
                   daemon_counters& counters, std::function<statistics_fields()> own_statistics)
    : impl_(new impl(config, table, counters, std::move(own_statistics))) {}

pipeline::~pipeline() {
  if (stop())
    delete impl_;
}

bool pipeline::submit(uint64_t graph_id, compiler::graph node_table) {
  auto& context = impl_->context;
  std::lock_guard lock(impl_->intake_mutex);
  if (context.stopping.load())
    return false;
  context.in_flight.fetch_add(1);
  caf::anon_send(impl_->intake, capture_job{graph_id, std::move(node_table)});
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

bool pipeline::drain(std::chrono::milliseconds grace) {
  {
    std::lock_guard lock(impl_->intake_mutex);
    impl_->context.stopping = true;
  }
  return wait_idle(grace);
}

bool pipeline::stop(std::chrono::milliseconds grace) {
  auto& i = *impl_;
  std::lock_guard stopping(i.stop_mutex);
  if (i.stopped)
    return i.settled;
  i.stopped = true;
  i.settled = drain(grace);
  i.context.table->drop_pending();
  if (!i.settled) {
    log(i.context.config.logging.level, log_level::warning,
        std::to_string(in_flight()) + " compile(s) did not stop within "
            + std::to_string(grace.count()) + " ms; abandoned");
    return false;
  }
  if (i.link)
    caf::anon_send_exit(i.link, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(i.capture, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(i.passes, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(i.compile, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(i.registry, caf::exit_reason::user_shutdown);
  caf::scoped_actor self{process_actor_system()};
  if (i.link)
    self->wait_for(i.link);
  self->wait_for(i.capture, i.passes, i.compile, i.registry);
  return true;
}

} // namespace gradd::actors
