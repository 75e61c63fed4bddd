// The registry's bookkeeping: states, retries, LRU eviction.

#include "engine/plan_table.hpp"

#include <catch2/catch.hpp>

#include <thread>

namespace {

using namespace gradd::engine;
using gradd::capture::structural_key;
using clock_type = std::chrono::steady_clock;

structural_key key_of(uint64_t word) {
  structural_key k;
  k.words = {word};
  k.seal();
  return k;
}

std::shared_ptr<const compiled_graph> empty_plan() {
  return std::make_shared<compiled_graph>();
}

bool any_plan(const graph_record&) {
  return true;
}

} // namespace

TEST_CASE("a key is claimed once while it compiles", "[engine][plan_table]") {
  plan_table table;
  auto first = table.claim(key_of(1));
  REQUIRE(first);
  CHECK(!table.claim(key_of(1)));
  CHECK(table.find(key_of(1), any_plan).blocked == first);
  table.publish(*first, empty_plan(), 1.0, 10);
  auto found = table.find(key_of(1), any_plan);
  CHECK(found.ready == first);
  CHECK(table.plans() == 1);
}

TEST_CASE("a failed key waits for its retry time", "[engine][plan_table]") {
  plan_table table;
  auto r = table.claim(key_of(2));
  table.fail(*r, gradd::fallback_reason::compile_error, clock_type::now() + std::chrono::hours(1));
  CHECK(table.find(key_of(2), any_plan).blocked == r);
  CHECK(!table.claim(key_of(2)));
  table.fail(*r, gradd::fallback_reason::compile_error, clock_type::now());
  CHECK(!table.find(key_of(2), any_plan).blocked);
  auto retry = table.claim(key_of(2));
  REQUIRE(retry);
  CHECK(retry->id != r->id);
}

TEST_CASE("eviction drops the least recently used plan, never a running one",
          "[engine][plan_table]") {
  plan_table table;
  std::vector<std::shared_ptr<graph_record>> r;
  for (uint64_t k = 0; k < 3; ++k) {
    r.push_back(table.claim(key_of(10 + k)));
    table.publish(*r.back(), empty_plan(), 1.0, 3);
  }
  table.find(key_of(10), any_plan);  // 10 is now the most recent
  r[1]->running = 1;                 // 11 is the oldest, but running
  auto extra = table.claim(key_of(13));
  table.publish(*extra, empty_plan(), 1.0, 3);
  CHECK(table.plans() == 3);
  CHECK(table.find(key_of(11), any_plan).ready);   // kept: running
  CHECK(!table.find(key_of(12), any_plan).ready);  // evicted: least recent idle
  CHECK(table.find(key_of(10), any_plan).ready);
}

TEST_CASE("pending records are dropped when the pipeline stops", "[engine][plan_table]") {
  plan_table table;
  auto r = table.claim(key_of(20));
  table.drop_pending();
  CHECK(r->state.load() == gradd::graph_state::failed);
  CHECK(table.claim(key_of(20)));  // compiles again next time
}

TEST_CASE("a held plan's first proposal leads by the horizon at its recent backwards' rate",
          "[engine][plan_table]") {
  // Note [Agreement across ranks]: 8 slow backwards (a process warming up)
  // in the 300 ms since the claim, then 400 within about 70 ms of the hold.
  // The rate since the claim, 408 backwards in 370 ms, gives a lead of 275
  // in the 250 ms horizon, and such leads were passed before the answer
  // came; the rate since the hold gives one of 500 or more (unless those
  // 70 ms take 200).
  graph_record record(1, key_of(7));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  record.seen.store(8);
  record.hold_for_agreement();
  CHECK_FALSE(record.propose_at(408));  // not within a quarter horizon of the hold
  std::this_thread::sleep_for(std::chrono::milliseconds(70));
  auto first = record.propose_at(408);
  REQUIRE(first);
  CHECK(*first >= 408 + 2 * 500);
  CHECK(record.renew_at.load() >= 408 + 500);
  CHECK_FALSE(record.propose_at(409));  // not due until within one lead
}
