// The seed a C++ backward() starts from, made once (Note [A seed made
// once], engine/shared_seed.hpp): a graph hit before the engine
// allocates nothing for it, and no backward that another path serves can
// see or change it.

#include "bench/peak_memory.hpp"
#include "cuda/graph_loop.hpp"

using gradd::test::clear_grads;
using gradd::test::compare_steps;
using gradd::test::grads_of;
using gradd::test::have_cuda;
using gradd::test::policy;
using torch::Tensor;

TEST_CASE("a graph hit before the engine allocates nothing, its seed included",
          "[cuda][graphs]") {
  if (!have_cuda())
    return;
  gradd::test::mlp m;
  auto params = m.parameters();
  gradd::reset();
  gradd::enable_guard on{policy(gradd::graph_shape_policy::static_shapes)};
  for (int64_t step = 0; step < 6; ++step) {
    clear_grads(params);
    m.loss(16, step).backward();
    REQUIRE(gradd::wait_for_compiles());
  }
  clear_grads(params);
  auto loss = m.loss(16, 6);
  auto hits = gradd::stats().graph_hits_before_engine;
  gradd::measure::peak_memory peak(loss.device());
  loss.backward();
  REQUIRE(gradd::stats().graph_hits_before_engine == hits + 1);
  CHECK(peak.peak_above_start() == 0);  // ones_like's seed would be 512 bytes
}

TEST_CASE("backwards that no graph serves start from seeds of their own", "[cuda][graphs]") {
  if (!have_cuda())
    return;
  auto graphs = policy(gradd::graph_shape_policy::static_shapes);
  // Steady steps, whose graphs are served before the engine from the shared
  // seed, around steps that a graph cannot serve and that would change a
  // shared seed: every later step would then start from zeros.
  SECTION("a hook that zeroes its loss's gradient in place") {
    gradd::test::mlp m;
    auto params = m.parameters();
    auto step = [&](size_t i) {
      clear_grads(params);
      auto loss = m.loss(16, static_cast<int64_t>(i));
      if (i == 6)
        loss.register_hook([](Tensor g) { g.zero_(); });
      loss.backward();
      return grads_of(params);
    };
    auto s = compare_steps(graphs, 14, step);
    CHECK(s.graph_hits_before_engine >= 6);
  }
  SECTION("a leaf whose gradient is the loss's seed, zeroed in place after each step") {
    // squeeze()'s backward hands the seed on as a view of it, and the stock
    // engine keeps a gradient nothing else holds as the leaf's .grad.
    auto w = torch::full({1}, 3.0, torch::device(torch::kCUDA)).requires_grad_();
    auto step = [&](size_t) {
      w.mutable_grad() = Tensor();
      w.squeeze().backward();
      auto grad = w.grad().clone();
      w.grad().zero_();
      return std::vector<Tensor>{grad};
    };
    compare_steps(graphs, 10, step);
  }
}
