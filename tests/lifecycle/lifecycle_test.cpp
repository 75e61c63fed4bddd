// Process lifecycle: each scenario of gradd_lifecycle_child runs in its own
// process, which must end by itself, with the status the scenario names,
// well within the bound (a compile in flight at exit would otherwise take a
// minute: its policy delays every compile by 60 s).

#include "child_process.hpp"

#include <catch2/catch.hpp>

namespace {

struct scenario {
  const char* name;
  int exit_code;
  const char* prints;  ///< a fragment of its output, "" for none
};

constexpr auto bound = std::chrono::seconds(20);

} // namespace

TEST_CASE("gradd leaves the process in every order of exit and threads", "[lifecycle]") {
  const scenario scenarios[] = {
      {"return_while_enabled", 0, ""},
      {"exit_while_enabled", 3, ""},
      {"compile_in_flight_at_exit", 0, "cancelled: gradd is stopping"},
      {"detached_thread_in_backward", 0, "cache_misses=1 plans=1"},
      {"disable_from_another_thread", 0, "enabled=0"},
      {"enable_from_another_thread", 0, "plan_backwards=1"},
      {"guards_on_several_threads", 0, "enabled=0"},
      {"disable_while_backwards_run", 0, "enabled=0"},
      {"exit_while_disabled_after_use", 0, ""},
      {"exit_while_threads_wait_for_a_sync_compile", 0, "waiting="},
  };
  for (const auto& s : scenarios) {
    INFO("scenario " << s.name);
    auto child = gradd::test::run_child({GRADD_LIFECYCLE_CHILD, s.name}, bound);
    auto output = child.out + child.err;
    INFO("output: " << output);
    CHECK(!child.timed_out);
    CHECK(child.signal == 0);
    CHECK(child.exited(s.exit_code));
    CHECK_THAT(output, Catch::Contains(s.prints));
    CHECK_THAT(output, !Catch::Contains("failed to compile"));
  }
}
