// The pipeline's stages on CAF's test coordinator: one message at a time,
// in a known order, with their work run inline, so each step is seen as it
// happens. No sleeps, no clocks: errors are values, and the registry's
// answer to a waiting request comes exactly when the graph settles. Which
// stage runs next is read from the coordinator's job queue; a tap in front
// of the registry keeps each result (peeking into a mailbox trips UBSan
// inside CAF 0.17's queue).

#include "actors/capture_actor.hpp"
#include "actors/compile_actor.hpp"
#include "actors/pass_pipeline_actor.hpp"
#include "actors/registry_actor.hpp"
#include "actors/type_ids.hpp"
#include "bench/node_tables.hpp"
#include "engine/table_sink.hpp"

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <catch2/catch.hpp>

#include <optional>

namespace {

using namespace gradd::actors;
using gradd::engine::graph_record;
using gradd::graph_state;
using gradd::engine::plan_table;
using gradd::capture::structural_key;
using gradd::engine::table_sink;

struct testing_config : caf::actor_system_config {
  testing_config() {
    set("scheduler.policy", caf::atom("testing"));
    add_message_types<caf::id_block::gradd>();
    add_error_category(caf::atom("gradd"), render_error);
  }
};

/// Stands in front of the registry: keeps a copy of each result, then
/// hands it on.
registry_actor::behavior_type result_tap(registry_actor::pointer self, registry_actor registry,
                                         std::vector<compile_result>* seen) {
  return {
    [self, registry, seen](compile_result& result) {
      seen->push_back(result);
      self->send(registry, std::move(result));
    },
    [self, registry](settled_request& request) {
      return self->delegate(registry, std::move(request));
    },
  };
}

/// The four stages over a real plan table, driven by the test coordinator.
struct stages {
  explicit stages(gradd::settings config = {}) {
    stage_setup setup{std::move(config), &sink, [](std::function<void()> work) { work(); },
                      &stopping};
    registry = system.spawn(registry_stage, setup, &counts);
    tap = system.spawn(result_tap, registry, &results);
    compile = system.spawn(compile_stage, setup, tap);
    passes = system.spawn(pass_pipeline_stage, setup, compile, tap);
    capture = system.spawn(capture_stage, setup, passes, tap);
    scheduler.run();
  }

  ~stages() {
    for (auto stage : {caf::actor_cast<caf::actor>(capture), caf::actor_cast<caf::actor>(passes),
                       caf::actor_cast<caf::actor>(compile), caf::actor_cast<caf::actor>(tap),
                       caf::actor_cast<caf::actor>(registry)})
      caf::anon_send_exit(stage, caf::exit_reason::user_shutdown);
    scheduler.run();
  }

  /// Claims a structure in the table and sends its captured node table in.
  std::shared_ptr<graph_record> submit(uint64_t structure) {
    structural_key key;
    key.words = {structure};
    key.seal();
    auto record = table.claim(key);
    caf::anon_send(capture, capture_job{record->id, gradd::measure::chain_table(3)});
    return record;
  }

  /// Whether `stage` handles the next message.
  template <class Handle>
  bool next_is(const Handle& stage) {
    if (!scheduler.has_job())
      return false;
    caf::abstract_actor* next = &scheduler.next_job<caf::scheduled_actor>();
    return next == caf::actor_cast<caf::abstract_actor*>(stage);
  }

  /// Handles the next message; false when none is waiting.
  bool step() { return scheduler.try_run_once(); }

  /// With one graph in flight: runs until the tap has its result, which
  /// the registry handles next.
  void run_to_tap() {
    while (!next_is(tap))
      REQUIRE(step());
    REQUIRE(step());
    REQUIRE(next_is(registry));
  }

  testing_config config;
  caf::actor_system system{config};
  caf::scheduler::test_coordinator& scheduler =
      dynamic_cast<caf::scheduler::test_coordinator&>(system.scheduler());
  plan_table table;
  table_sink sink{table};
  std::atomic<bool> stopping{false};
  published_counts counts;
  std::vector<compile_result> results;  ///< what reached the registry, in order
  registry_actor registry;
  registry_actor tap;
  compile_actor compile;
  pass_pipeline_actor passes;
  capture_actor capture;
};

} // namespace

TEST_CASE("a graph goes capture, passes, compile, registry, and only the registry publishes it",
          "[actors][stages]") {
  stages s;
  auto record = s.submit(1);
  REQUIRE(s.next_is(s.capture));
  REQUIRE(s.step());
  REQUIRE(s.next_is(s.passes));
  REQUIRE(s.step());
  REQUIRE(s.next_is(s.compile));
  REQUIRE(s.step());
  REQUIRE(s.next_is(s.tap));
  REQUIRE(s.step());
  REQUIRE(s.results.size() == 1);
  CHECK(s.results[0].ok());
  CHECK(record->state.load() == graph_state::pending);  // compiled, not yet published
  REQUIRE(s.next_is(s.registry));
  CHECK(s.counts.settled.load() == 0);
  REQUIRE(s.step());
  CHECK(record->state.load() == graph_state::ready);
  CHECK(record->compiled->plan.steps.size() > 0);
  CHECK(s.counts.settled.load() == 1);
  CHECK(s.counts.compiles.load() == 1);
  CHECK(!s.step());
}

TEST_CASE("a graph a pass fails settles as a gradd error naming the stage; the stock engine "
          "serves it",
          "[actors][stages]") {
  gradd::settings config;
  config.passes.pipeline = "no_such_pass";
  stages s(config);
  auto record = s.submit(1);
  s.run_to_tap();
  REQUIRE(s.results.size() == 1);
  const auto& result = s.results[0];
  CHECK(is(result.error, errc::compile_failed));
  CHECK(what(result.error).rfind("pass pipeline: ", 0) == 0);
  CHECK(s.system.render(result.error).find("gradd.compile_failed") != std::string::npos);
  REQUIRE(s.step());
  CHECK(record->state.load() == graph_state::failed);
  CHECK(s.counts.compiles.load() == 1);
}

TEST_CASE("a stop between two stages cancels the graph, which the registry drops",
          "[actors][stages]") {
  stages s;
  auto record = s.submit(1);
  REQUIRE(s.step());  // capture: lowered
  s.stopping = true;
  REQUIRE(s.step());  // passes: interrupted
  s.run_to_tap();
  CHECK(is(s.results.at(0).error, errc::cancelled));
  REQUIRE(s.step());
  CHECK(s.table.record(record->id) == nullptr);  // compiles again when next seen
  CHECK(record->state.load() == graph_state::failed);  // its waiters went to the stock engine
  CHECK(s.counts.settled.load() == 1);
  CHECK(s.counts.compiles.load() == 0);
}

TEST_CASE("a compile past compile.timeout_ms settles as timed out and failed, not dropped",
          "[actors][stages]") {
  gradd::settings config;
  config.compile.timeout_ms = 0;
  stages s(config);
  auto record = s.submit(1);
  REQUIRE(s.step());  // capture: interrupted before lowering
  s.run_to_tap();
  CHECK(is(s.results.at(0).error, errc::timed_out));
  REQUIRE(s.step());
  CHECK(record->state.load() == graph_state::failed);
  CHECK(s.table.record(record->id) == record);
}

TEST_CASE("a request for the counts is answered when the graphs before it have settled",
          "[actors][stages]") {
  stages s;
  std::vector<compile_counts> heard;
  auto ask = [&heard](caf::event_based_actor* self, registry_actor registry, uint64_t submitted) {
    self->request(registry, caf::infinite, settled_request{submitted})
        .then([&heard](compile_counts& counts) { heard.push_back(counts); });
  };
  s.system.spawn(ask, s.tap, uint64_t{0});
  s.system.spawn(ask, s.registry, uint64_t{2});
  s.scheduler.run();
  REQUIRE(heard.size() == 1);  // at once: nothing to wait for
  CHECK(heard[0].settled == 0);

  s.submit(1);
  s.submit(2);
  while (s.counts.settled.load() == 0)
    REQUIRE(s.step());  // the first graph settles: the request for two still waits
  while (!(s.next_is(s.registry) && s.results.size() == 2))
    REQUIRE(s.step());  // the second graph's stages, and any answer sent too early
  CHECK(heard.size() == 1);
  s.scheduler.run();
  CHECK(s.counts.settled.load() == 2);
  REQUIRE(heard.size() == 2);
  CHECK(heard[1].settled == 2);
  CHECK(heard[1].compiles == 2);
}
