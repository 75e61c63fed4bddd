// Random backward graphs against the stock engine, bitwise: plans (with and
// without gradient_ready_schedule, compiled or read back from cache.dir, on
// one thread or four), the functional capture and replay CUDA graphs are
// recorded from, and (on the GPU) CUDA graphs.
//
// The programs (engine/random_program.hpp) fan values out, so their
// gradients are summed, often three terms or more, whose float value
// depends on the order they are added in. Each runs once per engine on the
// same leaves and constants.

#include "engine/grad_check.hpp"
#include "engine/random_program.hpp"
#include "functional/functional_hooks.hpp"
#include "functional/passes.hpp"
#include "watchdog.hpp"

#include <stdlib.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace {

using namespace gradd::test;  // the oracle and the random programs
using torch::Tensor;

/// Programs per case: 3 s for the CPU cases on the 2-core VM.
constexpr uint32_t program_count = 400;

/// The first `programs` programs on plans (or graphs), in `dtype` on
/// `device`, under `policy` (check_against_stock's default if null);
/// returns how many backwards CUDA graphs served.
uint64_t check_plans(torch::Device device, torch::Dtype dtype, uint32_t programs = program_count,
                     const gradd::settings* policy = nullptr) {
  uint64_t graph_backwards = 0;
  for (uint32_t seed = 0; seed < programs; ++seed) {
    auto p = make_program(seed);
    INFO("program " << seed << ": " << p.describe());
    program_inputs inputs(p, seed, torch::TensorOptions().dtype(dtype).device(device));
    auto step = [&] { return run(p, inputs); };
    graph_backwards +=
        check_against_stock(inputs.leaves, step, 2, served_by::plan, policy).graph_backwards;
  }
  return graph_backwards;
}

/// A program with its own leaves and the stock engine's results for them,
/// computed at construction (gradd out of the way): for loops that check
/// runs off the main thread or across a whole policy, where
/// check_against_stock's reset per program would not do.
struct prepared_program {
  explicit prepared_program(uint32_t seed)
      : p(make_program(seed)),
        inputs(std::make_unique<program_inputs>(p, seed, torch::kFloat32)),
        initial(grads_of(inputs->leaves)) {
    gradd::disable_guard stock_engine;
    set_grads(inputs->leaves, initial);
    expected_result = run(p, *inputs);
    expected_grads = grads_of(inputs->leaves);
  }

  /// Backwards one run makes.
  uint64_t backwards() const { return retains(p.form) ? 2 : 1; }

  /// Runs the program from the `.grad` it started with; whether its results
  /// and `.grad` are the stock engine's, bitwise. Asserts nothing, so that
  /// threads may call it.
  bool runs_as_on_the_stock_engine() const {
    set_grads(inputs->leaves, initial);
    auto result = run(p, *inputs);
    return gradd::test::bitwise_equal(expected_result, result)
           && gradd::test::bitwise_equal(expected_grads, grads_of(inputs->leaves));
  }

  program p;
  std::unique_ptr<program_inputs> inputs;  // stable: leaves outlive moves of the vector
  std::vector<Tensor> initial, expected_result, expected_grads;
};

/// Program `p` through functional capture and replay (the recordings CUDA
/// graphs are captured from) on `device`, float32: captured on one draw of
/// the constants (from `seed`) and replayed on others (the same structure
/// with other values), the last time after the pass pipeline a stream actor
/// runs before it captures a CUDA graph; every run against the stock engine.
void check_functional(torch::Device device, const program& p, uint32_t seed) {
  auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  program_inputs inputs(p, seed, options);
  auto initial = grads_of(inputs.leaves);
  for (uint32_t data : {0u, 1u, 2u}) {
    const char* run_kind = data == 0 ? "capture" : data == 1 ? "replay" : "after passes";
    INFO("data seed " << data << " (" << run_kind << ")");
    if (data == 2)
      gradd::functional::run_passes(*last_recording(), "default,gradient_ready_schedule");
    program_inputs drawn(p, 1000 + seed * 10 + data, options);
    inputs.permutation = drawn.permutation;
    inputs.mask = drawn.mask;
    if (data > 0) {
      torch::NoGradGuard as_an_optimizer_step;
      for (auto& leaf : inputs.leaves)
        leaf.add_(0.125);
    }
    set_grads(inputs.leaves, initial);
    auto stock_result = run(p, inputs);
    auto stock_grads = grads_of(inputs.leaves);
    set_grads(inputs.leaves, initial);
    std::vector<Tensor> result;
    {
      hook_scope on(data == 0 ? &capture_hook : &replay_hook);
      result = run(p, inputs);
    }
    require_bitwise_equal(stock_grads, grads_of(inputs.leaves));
    require_bitwise_equal(stock_result, result);
  }
}

/// The first `programs` programs that make one backward, through check_functional.
void check_functional(torch::Device device, uint32_t programs) {
  for (uint32_t seed = 0; seed < programs; ++seed) {
    auto p = make_program(seed);
    // Two backwards of two structures (retain_graph is part of one): one
    // recording replays neither pair.
    if (retains(p.form))
      continue;
    INFO("program " << seed << ": " << p.describe());
    check_functional(device, p, seed);
  }
}

} // namespace

TEST_CASE("random graphs: plans give the stock engine's gradients bitwise", "[engine][random]") {
  for (auto dtype : {torch::kFloat32, torch::kFloat64})
    DYNAMIC_SECTION(dtype) { check_plans(torch::kCPU, dtype); }
}

TEST_CASE("random graphs: gradient_ready_schedule keeps the stock engine's gradients bitwise",
          "[engine][random][scheduling]") {
  auto policy = gradd::test::sync_settings();
  policy.passes.gradient_ready = true;
  check_plans(torch::kCPU, torch::kFloat32, program_count, &policy);
}

TEST_CASE("random graphs: plans loaded from cache.dir give the stock engine's gradients",
          "[engine][random][cache]") {
  char folder[] = "/tmp/gradd-random-plans-XXXXXX";
  REQUIRE(::mkdtemp(folder) != nullptr);
  auto policy = gradd::test::sync_settings();
  policy.cache.dir = folder;
  for (uint32_t seed = 0; seed < program_count / 4; ++seed) {
    auto p = make_program(seed);
    INFO("program " << seed << ": " << p.describe());
    program_inputs inputs(p, seed, torch::kFloat32);
    auto step = [&] { return run(p, inputs); };
    // Compiled and written; then, gradd reset, read back from the file.
    check_against_stock(inputs.leaves, step, 1, served_by::plan, &policy);
    CHECK(check_against_stock(inputs.leaves, step, 1, served_by::plan, &policy).plans_loaded
          >= 1);
  }
  std::system((std::string("rm -rf ") + folder).c_str());
}

TEST_CASE("random graphs: functional capture and replay give the stock engine's gradients",
          "[engine][functional][random]") {
  check_functional(torch::kCPU, program_count);
}

// Of 3000 programs run once, only one differed, reduced here:
// u = p + q's backward hands one tensor, a view into the cat's gradient at
// offset 25, to p's sum and to q's AccumulateGrad, which steals it once the
// sum has added it. reorder_accumulate_grad_nodes moved q's accumulation
// before that sum, so it cloned (offset 0): the same bits in another
// storage. No pass moves an op past another use of its args now
// (compiler/passes/hook_moves.hpp).
TEST_CASE("random graphs: after the passes, .grad steals where the stock engine's does",
          "[engine][functional][random][passes]") {
  program p;
  p.leaves = 3;  // leaf 2: contiguous and without `.grad`, so it can steal
  p.ops = {{op_code::add, 1, 2}, {op_code::tanh, 1, 1}, {op_code::cat_narrow, 4, 3, 0, 1}};
  p.outputs = {5};
  p.weights = {1.0};
  INFO(p.describe());
  check_functional(torch::kCPU, p, 0);
}

TEST_CASE("random graphs: functional capture and replay on CUDA give the stock engine's gradients",
          "[engine][functional][random][cuda]") {
  if (!torch::cuda::is_available()) {
    WARN("CUDA not available: skipped");
    return;
  }
  check_functional(torch::kCUDA, program_count / 4);
}

TEST_CASE("random graphs on four threads at once, compiled in the background, stay exact",
          "[engine][random][threads]") {
  constexpr int threads = 4;
  constexpr uint32_t programs_each = 60;
  constexpr uint32_t overlap_step = 30;  // neighbours share 30 programs: concurrent misses
  constexpr int rounds = 3;
  // Each thread its own leaves.
  std::vector<std::vector<prepared_program>> jobs(threads);
  uint64_t backwards = 0;
  for (int t = 0; t < threads; ++t)
    for (uint32_t i = 0; i < programs_each; ++i) {
      jobs[t].emplace_back(static_cast<uint32_t>(t) * overlap_step + i);
      backwards += rounds * jobs[t].back().backwards();
    }

  gradd::reset();
  gradd::enable_guard on;  // the default policy: compiles in the background
  gradd::test::watchdog guard{std::chrono::seconds(240)};
  std::mutex first_mismatch_mutex;
  std::string first_mismatch;
  std::atomic<int> mismatches{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      for (int round = 0; round < rounds; ++round)
        for (const auto& job : jobs[t]) {
          if (job.runs_as_on_the_stock_engine())
            continue;
          ++mismatches;
          std::lock_guard lock(first_mismatch_mutex);
          if (first_mismatch.empty())
            first_mismatch = "thread " + std::to_string(t) + ", round " + std::to_string(round)
                             + ": " + job.p.describe();
        }
    });
  for (auto& w : workers)
    w.join();
  INFO(first_mismatch);
  CHECK(mismatches == 0);
  REQUIRE(gradd::wait_for_compiles());
  auto s = gradd::stats();
  CHECK(s.backwards == backwards);
  CHECK(s.raised_backwards == 0);
  CHECK(s.plan_backwards > 0);
  CHECK(s.plan_backwards + s.eager_backwards == backwards);
}

TEST_CASE("random graphs: plans evicted under cache.max_plans and compiled again stay exact",
          "[engine][random][cache]") {
  constexpr uint32_t programs = 40;
  constexpr int rounds = 3;
  std::vector<prepared_program> jobs;
  for (uint32_t seed = 0; seed < programs; ++seed)
    jobs.emplace_back(seed);
  auto policy = gradd::test::sync_settings();
  policy.cache.max_plans = 8;
  gradd::reset();
  gradd::enable_guard on{policy};
  for (int round = 0; round < rounds; ++round)
    for (const auto& job : jobs) {
      INFO("round " << round << ", program " << job.p.describe());
      REQUIRE(job.runs_as_on_the_stock_engine());
    }
  auto s = gradd::stats();
  CHECK(s.plans <= 8);
  CHECK(s.compiles > programs);  // evicted structures compiled again
  CHECK(s.eager_backwards == 0);
}

TEST_CASE("random graphs: CUDA graphs give the stock engine's gradients bitwise",
          "[engine][random][cuda][graphs]") {
  if (!torch::cuda::is_available()) {
    WARN("CUDA not available: skipped");
    return;
  }
  gradd::test::graphs_under_test_scope graphs;
  // Each structure's capture is waited for: a quarter of the programs.
  auto graph_backwards = check_plans(torch::kCUDA, torch::kFloat32, program_count / 4);
  WARN(graph_backwards << " backwards of " << program_count / 4
                       << " programs served by CUDA graphs");
  CHECK(graph_backwards > 0);
}
