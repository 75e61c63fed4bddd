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
#include "config/daemon_address.hpp"
#include "config/log.hpp"

#include <caf/all.hpp>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/task_arena.h>

#include <optional>

namespace gradd::actors {

struct pipeline::impl {
  impl(const settings& config, plan_sink& sink, daemon_feed& feed,
       std::function<statistics_fields()> own_statistics)
      : arena_threads(static_cast<int>(config.compile.threads)),
        parallelism(arena_threads + 1 > tbb::info::default_concurrency()
                        ? std::make_optional<tbb::global_control>(
                            tbb::global_control::max_allowed_parallelism, arena_threads + 1)
                        : std::nullopt),
        arena(arena_threads, 0),
        sink(sink),
        logging(config.logging.level) {
    stage_setup setup{config, &sink,
                      [this](std::function<void()> work) { arena.enqueue(std::move(work)); },
                      &stopping};
    feed.cache_dir.store(nullptr);  // until a daemon of this pipeline welcomes it
    auto& system = process_actor_system();
    registry = system.spawn(registry_stage, setup, &counts);
    compile = system.spawn(compile_stage, setup, registry);
    passes = system.spawn(pass_pipeline_stage, setup, compile, registry);
    capture = system.spawn(capture_stage, setup, passes, registry);
    if (configured_daemon(config) || host_compile_service())
      link = system.spawn(daemon_link_stage, setup, capture, registry, &feed,
                          std::move(own_statistics));
    intake = link ? caf::actor_cast<capture_actor>(link) : capture;
  }

  int arena_threads;
  // TBB's global pool has cores - 1 workers; an arena wider than that needs
  // a larger pool (CAF-0.17.md, section 4, "2-core trap").
  std::optional<tbb::global_control> parallelism;
  tbb::task_arena arena;
  plan_sink& sink;
  log_level logging;
  std::atomic<bool> stopping{false};   ///< read by the stages' work
  std::atomic<uint64_t> submitted{0};  ///< written by submit only
  published_counts counts;             ///< written by the registry only
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

pipeline::pipeline(const settings& config, plan_sink& sink, daemon_feed& feed,
                   std::function<statistics_fields()> own_statistics)
    : impl_(new impl(config, sink, feed, std::move(own_statistics))) {}

pipeline::~pipeline() {
  if (stop())
    delete impl_;
}

bool pipeline::submit(uint64_t graph_id, compiler::graph node_table) {
  std::lock_guard lock(impl_->intake_mutex);
  if (impl_->stopping.load())
    return false;
  impl_->submitted.fetch_add(1);
  caf::anon_send(impl_->intake, capture_job{graph_id, std::move(node_table)});
  return true;
}

bool pipeline::propose(uint64_t graph_id, uint64_t proposal) {
  if (!impl_->link || impl_->stopping.load())
    return false;
  caf::anon_send(impl_->link, rank_proposal{graph_id, proposal});
  return true;
}

bool pipeline::wait_idle(std::chrono::milliseconds timeout) {
  auto submitted = impl_->submitted.load();
  if (impl_->counts.settled.load() >= submitted)
    return true;
  caf::scoped_actor self{process_actor_system()};
  bool settled = false;
  self->request(impl_->registry, timeout, settled_request{submitted})
      .receive([&](compile_counts&) { settled = true; }, [](caf::error&) {});
  return settled;
}

uint64_t pipeline::in_flight() const noexcept {
  return impl_->submitted.load() - impl_->counts.settled.load();
}

uint64_t pipeline::finished() const noexcept {
  return impl_->counts.compiles.load();
}

bool pipeline::drain(std::chrono::milliseconds grace) {
  {
    std::lock_guard lock(impl_->intake_mutex);
    impl_->stopping = true;
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
  i.sink.drop_pending();
  if (!i.settled) {
    log(i.logging, log_level::warning,
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
