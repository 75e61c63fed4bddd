// Note [Early launch] (cuda/early_launch.cpp): when a graph launches
// before its backward's lift, and that a lost bet never shows in the
// gradients, compared bitwise with a stock-engine run of the same loop.

#include "cuda/graph_loop.hpp"

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <optional>

using gradd::test::clear_grads;
using gradd::test::compare_steps;
using gradd::test::grads_of;
using gradd::test::have_cuda;
using gradd::test::policy;
using gradd::test::run_loop;
using torch::Tensor;

namespace {

/// The early launches counted as step `step` began and as the next one
/// did: whether step `step` launched early.
struct launches_around {
  explicit launches_around(size_t step) : step(step) {}
  /// Call at the start of each step `at`.
  void watch(size_t at) {
    if (at == step)
      before = gradd::stats().graph_early_launches;
    if (at == step + 1)
      after = gradd::stats().graph_early_launches;
  }
  size_t step;
  uint64_t before = 0;
  uint64_t after = 0;
};

/// The loss of `m`'s first two layers alone at batch 16: another structure
/// than m.loss's, with the same node first.
Tensor two_layers(const gradd::test::mlp& m, size_t step) {
  return m.hidden(16, static_cast<int64_t>(step), 2).square().mean();
}

} // namespace

TEST_CASE("a steady loop launches its graph before the lift (Note [Early launch])",
          "[cuda][graphs]") {
  if (!have_cuda())
    return;
  auto graphs = policy(gradd::graph_shape_policy::static_shapes);
  const std::vector<int64_t> steady(10, 16);
  auto on_cuda = torch::device(torch::kCUDA);

  SECTION("once a replay found its inputs where the last one did, the next ones launch early") {
    auto s = run_loop(graphs, steady);
    CHECK(s.graph_backwards == 9);
    CHECK(s.graph_early_launches >= 5);
    CHECK(s.graph_early_misses == 0);
    // gradd's engine is this process's default: the bets are placed before
    // Engine::execute (Note [Bets before the engine]), and every one the
    // lift confirms is served there (Note [Graph hits before the engine]).
    CHECK(s.graph_bets_before_engine == s.graph_early_launches);
    CHECK(s.graph_hits_before_engine == s.graph_early_launches);
    // From the third served before the engine in a row, before the walk
    // too (Note [Bets before the walk]).
    CHECK(s.graph_bets_before_walk >= 3);
  }
  SECTION("off by policy") {
    graphs.cuda_graphs.early_launch = false;
    auto s = run_loop(graphs, steady);
    CHECK(s.graph_backwards == 9);
    CHECK(s.graph_early_launches == 0);
    CHECK(s.graph_bets_before_engine == 0);
    CHECK(s.graph_hits_before_engine == 0);
    CHECK(s.graph_bets_before_walk == 0);
  }
  SECTION("inputs that moved: the graph is launched again, gradients bitwise") {
    // A tensor allocated first takes the block the step's first activation
    // would have had, and every later one moves.
    auto s = run_loop(graphs, steady, [&](size_t step) {
      return step == 6 ? torch::empty({16, 64}, on_cuda) : Tensor();
    });
    CHECK(s.graph_early_misses >= 1);
    CHECK(s.graph_early_launches > s.graph_early_misses);
    // Its shape holds, so it is served before the engine all the same.
    CHECK(s.graph_hits_before_engine == s.graph_early_launches);
  }
  SECTION("a new shape after a steady run: the bet is abandoned, gradients bitwise") {
    auto s = run_loop(graphs, {16, 16, 16, 16, 16, 32, 32, 32, 32});
    CHECK(s.graph_early_misses >= 1);
    CHECK(s.graph_recordings == 2);
    // The lost bet goes on to the engine, whose hook records the new shape.
    CHECK(s.graph_hits_before_engine < s.graph_early_launches);
  }
  SECTION("a bet before the walk on a structure that changed is lost, gradients bitwise") {
    gradd::test::mlp m;
    auto params = m.parameters();
    // Steps 0-9 the mlp, 10-13 its first two layers alone: the same loss
    // node first, another structure.
    auto s = compare_steps(graphs, 14, [&](size_t step) {
      clear_grads(params);
      (step < 10 ? m.loss(16, static_cast<int64_t>(step)) : two_layers(m, step)).backward();
      return grads_of(params);
    });
    CHECK(s.graph_bets_before_walk >= 1);
    CHECK(s.graph_early_misses >= 1);  // step 10's
  }
  SECTION("runs of one structure shorter than the streak a bet before the walk needs place none") {
    gradd::test::mlp m;
    auto params = m.parameters();
    // Twelve steps of the mlp, then runs of three of it and one of its first
    // two layers alone: each run's first step ends the streak, and its
    // third, once the run is shorter than the streak needed, bets no more.
    uint64_t bets_at_12 = 0;
    auto s = compare_steps(graphs, 28, [&](size_t step) {
      if (step == 12)
        bets_at_12 = gradd::stats().graph_bets_before_walk;
      clear_grads(params);
      bool other = step >= 12 && step % 4 == 3;
      (other ? two_layers(m, step) : m.loss(16, static_cast<int64_t>(step))).backward();
      return grads_of(params);
    });
    CHECK(bets_at_12 >= 3);
    // Steps 12-14, which go on with the first twelve's streak, and step 15
    // (lost: the other structure), at most; without the doubling, two more
    // in every later run of four (its third step's, and the lost one).
    CHECK(s.graph_bets_before_walk - bets_at_12 <= 4);
  }
  SECTION("a steady loop moved to another stream: its bet before the walk is launched again there") {
    gradd::test::mlp m;
    auto params = m.parameters();
    c10::impl::VirtualGuardImpl cuda(c10::DeviceType::CUDA);
    auto other = cuda.getStreamFromGlobalPool(cuda.getDevice());
    auto s = compare_steps(graphs, 12, [&](size_t step) {
      clear_grads(params);
      std::optional<c10::StreamGuard> on_other;
      if (step >= 8)
        on_other.emplace(other);
      m.loss(16, static_cast<int64_t>(step)).backward();
      return grads_of(params);  // read on the stream the step ran on
    });
    CHECK(s.graph_bets_before_walk >= 1);
    CHECK(s.graph_early_misses >= 1);  // step 8's, launched on the stream before
  }
  SECTION("two structures in turn bet after the walk only") {
    gradd::test::mlp m;
    auto params = m.parameters();
    auto s = compare_steps(graphs, 16, [&](size_t step) {
      clear_grads(params);
      (step % 2 == 0 ? m.loss(16, static_cast<int64_t>(step)) : two_layers(m, step)).backward();
      return grads_of(params);
    });
    CHECK(s.graph_backwards >= 8);
    CHECK(s.graph_bets_before_walk == 0);  // neither is served twice in a row
  }
  // Batch sizes 16, 32, 48, 16, ...: no two steps in a row share a shape.
  std::vector<int64_t> sweep;
  for (int64_t step = 0; step < 18; ++step)
    sweep.push_back(16 * (1 + step % 3));
  SECTION("a shape sweep bets on the graph its probe names (Note [Shape probe])") {
    auto s = run_loop(graphs, sweep);
    CHECK(s.graph_recordings == 3);
    CHECK(s.graph_backwards == 15);
    // Steps 3-5 replay each graph first (their probes learnt), steps 6-8
    // prove their addresses; from step 9 on each backward launches early.
    CHECK(s.graph_early_launches >= 6);
    CHECK(s.graph_early_misses == 0);
    CHECK(s.graph_bets_before_engine == s.graph_early_launches);
    CHECK(s.graph_hits_before_engine == s.graph_early_launches);
  }
  SECTION("a probe that cannot tell the shapes apart places no bet") {
    // The loss's node, a product of two scalars, looks alike at every batch size.
    gradd::test::mlp m;
    auto params = m.parameters();
    auto scale = torch::full({}, 0.5, on_cuda);
    auto s = compare_steps(graphs, sweep.size(), [&](size_t step) {
      clear_grads(params);
      (m.loss(sweep[step], static_cast<int64_t>(step)) * scale).backward();
      return grads_of(params);
    });
    CHECK(s.graph_backwards == 15);
    CHECK(s.graph_early_launches == 0);
    CHECK(s.graph_early_misses == 0);
  }
  SECTION("no early launch after the allocator freed a segment, until a replay proves it again") {
    launches_around freeing(6);
    auto s = run_loop(graphs, steady, [&](size_t step) {
      if (step == freeing.step) {
        torch::empty({64 << 20}, on_cuda);  // a segment of its own, free again at once
        c10::getDeviceAllocator(c10::kCUDA)->emptyCache();
      }
      freeing.watch(step);
      return Tensor();
    });
    CHECK(freeing.before >= 1);
    CHECK(freeing.after == freeing.before);  // step 6 was not launched early
    CHECK(s.graph_early_launches > freeing.after);
  }
  SECTION("an index is read live, and only while the node holding it has its captured shape") {
    auto w = (torch::randn({64, 64}, on_cuda) * 0.1).requires_grad_();
    // Six steps of each batch: the allocator may take two steps of the new
    // one to settle its addresses (after the out-of-memory case it did, on
    // a Hopper GPU), and a graph launches early once a replay found none moved.
    const std::vector<int64_t> batches{16, 16, 16, 16, 16, 16, 32, 32, 32, 32, 32, 32};
    launches_around new_shape(6);
    auto s = compare_steps(graphs, batches.size(), [&](size_t step) {
      new_shape.watch(step);
      auto batch = batches[step];
      auto rows = torch::arange(batch * 64, torch::dtype(torch::kFloat32).device(torch::kCUDA));
      auto x = torch::sin(rows.reshape({batch, 64}) * (0.01 * static_cast<double>(step + 1)));
      // Other targets every step: a graph reading them stale would be wrong.
      auto targets = torch::arange(batch, torch::dtype(torch::kLong).device(torch::kCUDA))
                         .mul(static_cast<int64_t>(step) + 7)
                         .remainder(64);
      w.mutable_grad() = Tensor();
      torch::nll_loss(torch::log_softmax(torch::mm(x, w), 1), targets).backward();
      return std::vector<Tensor>{w.grad()};
    });
    CHECK(s.graph_backwards == 10);
    CHECK(s.graph_bound_bytes >= 16 * 8);  // the targets among them (not zeros)
    CHECK(new_shape.before >= 1);
    // The bet on batch 16's graph, whose loss node now holds 32 targets, is not launched.
    CHECK(new_shape.after == new_shape.before);
    CHECK(s.graph_early_launches > new_shape.after);
  }
  SECTION("bytes are read as data: cuDNN's RNN reserve does not hold a launch back") {
    torch::nn::LSTM lstm(torch::nn::LSTMOptions(8, 16).num_layers(2));
    lstm->to(torch::kCUDA);
    auto params = lstm->parameters();
    const std::vector<int64_t> batches{4, 4, 4, 4, 4, 4, 8, 8, 8, 8};
    launches_around new_shape(6);
    auto s = compare_steps(graphs, batches.size(), [&](size_t step) {
      new_shape.watch(step);
      auto batch = batches[step];
      auto steps = torch::arange(5 * batch * 8, torch::dtype(torch::kFloat32).device(torch::kCUDA));
      auto x = torch::sin(steps.reshape({5, batch, 8}) * (0.01 * static_cast<double>(step + 1)));
      clear_grads(params);
      std::get<0>(lstm->forward(x)).square().mean().backward();
      return grads_of(params);
    });
    CHECK(s.graph_backwards == 8);
    CHECK(new_shape.before >= 1);
    // The bet on batch 4's graph launches, its reserve read where the last
    // replay found it (an index would have held it back), and is lost.
    CHECK(new_shape.after == new_shape.before + 1);
    CHECK(s.graph_early_misses >= 1);
  }
}
