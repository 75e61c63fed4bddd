// Policy keys seen end to end: the IR dump's file names, and the NaN check
// on each path a backward can take (a plan, the stock engine while a plan
// compiles or after its compile failed, autograd::grad outputs), and on the
// paths it does not cover (docs/design.md, "Known gaps").

#include "compiler/pass.hpp"
#include "config/policy_files.hpp"
#include "engine/grad_check.hpp"

#include <torch/csrc/autograd/anomaly_mode.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <set>
#include <sstream>

namespace {

using gradd::execute::plan_trace_of_this_thread;
using torch::Tensor;

/// Plans run to the end on this thread so far.
uint64_t plan_runs() { return plan_trace_of_this_thread().runs; }

/// The one structure captured since reset().
gradd::graph_statistics only_graph() {
  auto graphs = gradd::graph_stats();
  REQUIRE(graphs.size() == 1);
  return graphs[0];
}

/// Two leaves of distinct shapes, so an error naming a shape names a leaf:
/// `finite`'s gradient is ones, `poisoned`'s is NaN.
struct nan_leaves {
  Tensor finite = torch::ones({2}, torch::dtype(torch::kFloat64).requires_grad(true));
  Tensor poisoned = torch::ones({3}, torch::dtype(torch::kFloat64).requires_grad(true));
  Tensor loss() const { return finite.sum() + (poisoned * std::nan("")).sum(); }
};

/// What `backward` raised, "" if nothing.
std::string error_of(const std::function<void()>& backward) {
  try {
    backward();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "";
}

/// Requires `error` to be the NaN check naming `poisoned` (shape [3]) as
/// the only leaf, and no output.
void require_names_poisoned_leaf(const std::string& error) {
  CHECK_THAT(error, Catch::Contains("gradd: NaN in the gradients of: parameter "));
  CHECK_THAT(error, Catch::Contains("(shape [3])"));
  CHECK_THAT(error, !Catch::Contains("shape [2]"));
  CHECK_THAT(error, !Catch::Contains("output"));
}

/// Requires `error` to be the NaN check naming output 1 of autograd::grad
/// (the gradient of `poisoned`) and nothing else.
void require_names_output_1(const std::string& error) {
  CHECK_THAT(error, Catch::EndsWith("gradd: NaN in the gradients of: output 1 (leaves are "
                                    "numbered in graph order from the loss)"));
}

gradd::settings nan_checked(gradd::settings s) {
  s.nan_check.enabled = true;
  return s;
}

/// Async, with every compile held back: the stock engine serves the first
/// backwards of a structure while its plan compiles.
gradd::settings compiling_slowly() {
  gradd::settings s;
  s.compile.delay_ms = 1000;
  return s;
}

/// Async, with a compile that times out: the structure fails and the stock
/// engine serves it from then on.
gradd::settings failing_compiles() {
  gradd::settings s;
  s.compile.delay_ms = 60000;
  s.compile.timeout_ms = 100;
  s.fallback.on_compile_error = gradd::compile_error_policy::never_retry;
  return s;
}

std::set<std::string> files_in(const std::filesystem::path& folder) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    CHECK(entry.is_regular_file());
    CHECK(entry.file_size() > 0);
    names.insert(entry.path().filename().string());
  }
  return names;
}

} // namespace

TEST_CASE("ir_dump_dir gets graph_<id>.<step>.<pass>.txt and .dot for capture and each "
          "default pass, and nothing else",
          "[engine][policy]") {
  auto folder = gradd::test::scratch_folder() / "dumps";  // missing: enable creates it
  auto s = gradd::test::sync_settings();
  s.logging.ir_dump_dir = folder.string();
  gradd::reset();
  auto x = torch::randn({4}, torch::requires_grad());
  auto runs = plan_runs();
  uint64_t id = 0;
  {
    gradd::enable_guard on{s};
    (x * x).sum().backward();
    id = only_graph().id;
  }
  REQUIRE(plan_runs() == runs + 1);  // compiled, so dumped, before it ran

  std::vector<std::string> steps{"capture"};
  std::istringstream pipeline(gradd::compiler::default_pipeline());
  for (std::string pass; std::getline(pipeline, pass, ',');)
    steps.push_back(pass);
  REQUIRE(steps.size() > 2);
  std::set<std::string> expected;
  for (size_t step = 0; step < steps.size(); ++step) {
    auto base = "graph_" + std::to_string(id) + "." + std::to_string(step) + "." + steps[step];
    expected.insert(base + ".txt");
    expected.insert(base + ".dot");
  }
  CHECK(files_in(folder) == expected);
}

TEST_CASE("nan_check raises naming the leaf on a plan-served backward", "[engine][policy]") {
  nan_leaves leaves;
  gradd::reset();
  gradd::enable_guard on{nan_checked(gradd::test::sync_settings())};
  auto runs = plan_runs();
  require_names_poisoned_leaf(error_of([&] { leaves.loss().backward(); }));
  CHECK(plan_runs() == runs + 1);  // the plan ran, then the check raised
  CHECK(gradd::stats().raised_backwards == 1);
}

TEST_CASE("nan_check raises naming the leaf on backwards the stock engine serves",
          "[engine][policy]") {
  nan_leaves leaves;
  gradd::reset();
  auto runs = plan_runs();
  SECTION("while the plan compiles") {
    gradd::enable_guard on{nan_checked(compiling_slowly())};
    require_names_poisoned_leaf(error_of([&] { leaves.loss().backward(); }));
    CHECK(only_graph().pending_backwards == 1);  // served while its plan compiled
    CHECK(gradd::stats().raised_backwards == 1);
  }
  SECTION("after its compile failed") {
    gradd::enable_guard on{nan_checked(failing_compiles())};
    require_names_poisoned_leaf(error_of([&] { leaves.loss().backward(); }));
    REQUIRE(gradd::wait_for_compiles(std::chrono::seconds(10)));
    require_names_poisoned_leaf(error_of([&] { leaves.loss().backward(); }));
    CHECK(only_graph().state == gradd::graph_state::failed);
    CHECK(only_graph().eager_backwards == 2);
    CHECK(gradd::stats().raised_backwards == 2);
  }
  CHECK(plan_runs() == runs);
}

TEST_CASE("nan_check raises naming the autograd::grad output that holds NaN",
          "[engine][policy]") {
  nan_leaves leaves;
  auto grad = [&] { torch::autograd::grad({leaves.loss()}, {leaves.finite, leaves.poisoned}); };
  gradd::reset();
  auto runs = plan_runs();
  SECTION("served by a plan") {
    gradd::enable_guard on{nan_checked(gradd::test::sync_settings())};
    require_names_output_1(error_of(grad));
    CHECK(plan_runs() == runs + 1);
  }
  SECTION("served by the stock engine while the plan compiles") {
    gradd::enable_guard on{nan_checked(compiling_slowly())};
    require_names_output_1(error_of(grad));
    CHECK(plan_runs() == runs);
    CHECK(only_graph().pending_backwards == 1);
  }
  // The leaves' .grad are untouched: autograd::grad returns the gradients.
  CHECK(!leaves.finite.grad().defined());
  CHECK(!leaves.poisoned.grad().defined());
}

TEST_CASE("nan_check raises on a create_graph backward served by a plan", "[engine][policy]") {
  nan_leaves leaves;
  gradd::reset();
  gradd::enable_guard on{nan_checked(gradd::test::sync_settings())};
  auto runs = plan_runs();
  require_names_poisoned_leaf(
      error_of([&] { leaves.loss().backward({}, true, /*create_graph=*/true); }));
  CHECK(plan_runs() == runs + 1);
  CHECK(gradd::stats().raised_backwards == 1);
}

TEST_CASE("nan_check does not look at force_eager or anomaly-mode backwards "
          "(a known gap, docs/design.md)",
          "[engine][policy]") {
  nan_leaves leaves;
  gradd::reset();
  auto runs = plan_runs();
  auto policy = nan_checked(gradd::test::sync_settings());
  gradd::fallback_reason reason{};
  SECTION("fallback.force_eager") {
    reason = gradd::fallback_reason::force_eager;
    policy.fallback.force_eager = true;
    gradd::enable_guard on{policy};
    CHECK(error_of([&] { leaves.loss().backward(); }).empty());
  }
  SECTION("anomaly mode, without its own NaN check") {
    reason = gradd::fallback_reason::anomaly_mode;
    gradd::enable_guard on{policy};
    torch::autograd::DetectAnomalyGuard anomaly(/*check_nan=*/false);
    CHECK(error_of([&] { leaves.loss().backward(); }).empty());
  }
  // NaN reached the leaf, and nothing raised.
  CHECK(leaves.poisoned.grad().isnan().all().item<bool>());
  CHECK(plan_runs() == runs);
  auto s = gradd::stats();
  CHECK(s.eager_for(reason) == 1);
  CHECK(s.raised_backwards == 0);
}
