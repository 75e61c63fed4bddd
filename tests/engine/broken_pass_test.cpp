// A pass that breaks the graph, end to end: the verifier names it, the
// graph's compile fails, the stock engine serves its backwards with exact
// gradients, and fallback.on_compile_error decides whether it compiles again.

#include "engine/grad_check.hpp"

#include "compiler/pass.hpp"

#include <algorithm>

namespace {

/// Reverses the op order: every value is then used before it is defined.
class reverse_ops final : public gradd::compiler::pass {
public:
  const char* name() const noexcept override { return "test_reverse_ops"; }
  bool run(gradd::compiler::graph& g, gradd::compiler::analysis_manager&) override {
    std::reverse(g.ops.begin(), g.ops.end());
    return true;
  }
};

void register_once() {
  static bool registered = [] {
    gradd::compiler::register_pass(
        {"test_reverse_ops", "reverses the op order (breaks the graph)",
         []() -> std::unique_ptr<gradd::compiler::pass> {
           return std::make_unique<reverse_ops>();
         }});
    return true;
  }();
  (void)registered;
}

gradd::settings breaking(gradd::compile_error_policy on_error) {
  auto s = gradd::test::sync_settings();
  s.passes.pipeline = "default,test_reverse_ops";
  s.fallback.on_compile_error = on_error;
  s.fallback.retry_after_ms = 0;
  return s;
}

} // namespace

TEST_CASE("a pass that breaks the graph fails its compile; the stock engine serves",
          "[engine][passes]") {
  register_once();
  torch::manual_seed(2);
  auto w = torch::randn({4, 4}).requires_grad_();
  auto x = torch::randn({3, 4});
  auto step = [&] {
    gradd::test::clear_grads({w});
    torch::tanh(x.mm(w)).pow(2).sum().backward();
    return gradd::test::grads_of({w});
  };
  auto expected = [&] {
    gradd::disable_guard off;
    return step();
  }();
  SECTION("never_retry: one compile, then the stock engine for good") {
    gradd::reset();
    gradd::enable_guard on{breaking(gradd::compile_error_policy::never_retry)};
    auto runs_before = gradd::execute::plan_trace_of_this_thread().runs;
    for (int i = 0; i < 3; ++i)
      gradd::test::require_bitwise_equal(expected, step());
    CHECK(gradd::execute::plan_trace_of_this_thread().runs == runs_before);
    auto s = gradd::stats();
    CHECK(s.compiles == 1);
    CHECK(s.plan_backwards == 0);
    CHECK(s.eager_for(gradd::fallback_reason::compile_error) == 3);
    auto graphs = gradd::graph_stats();
    REQUIRE(graphs.size() == 1);
    CHECK(graphs[0].state == gradd::graph_state::failed);
    CHECK(graphs[0].fallback == gradd::fallback_reason::compile_error);
  }
  SECTION("retry_after 0 ms: each backward compiles it again, and fails again") {
    gradd::reset();
    gradd::enable_guard on{breaking(gradd::compile_error_policy::retry_after)};
    for (int i = 0; i < 3; ++i)
      gradd::test::require_bitwise_equal(expected, step());
    auto s = gradd::stats();
    CHECK(s.compiles == 3);
    CHECK(s.eager_for(gradd::fallback_reason::compile_error) == 3);
  }
}

TEST_CASE("a registered pass name cannot be taken twice", "[compiler][passes]") {
  register_once();
  CHECK_THROWS_WITH(gradd::compiler::register_pass({"test_reverse_ops", "again", nullptr}),
                    Catch::Contains("exists"));
  CHECK_THROWS_WITH(gradd::compiler::register_pass({"dce", "a second dce", nullptr}),
                    Catch::Contains("exists"));
  CHECK_THROWS_WITH(gradd::compiler::find_pass("no_such_pass"),
                    Catch::Contains("test_reverse_ops"));
}
