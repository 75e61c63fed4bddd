// CUDA graphs: who serves each backward under each shape policy, what a
// capture leaves to plans, and what a graph reads and hands out; lent
// gradients in lent_gradients_test.cpp, failed captures in
// capture_failure_test.cpp. Gradients are compared bitwise with
// a stock-engine run of the same loop.

#include "cuda/graph_loop.hpp"

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/autograd/graph_task.h>

using gradd::test::clear_grads;
using gradd::test::grads_of;
using gradd::test::have_cuda;
using gradd::test::mlp;
using gradd::test::policy;
using gradd::test::require_bitwise_equal;
using gradd::test::run_loop;
using torch::Tensor;

TEST_CASE("a shape sweep under each policy", "[cuda][graphs]") {
  if (!have_cuda())
    return;
  // Three shapes, each seen three times in turn, then the first again.
  const std::vector<int64_t> sweep{8, 16, 32, 8, 16, 32, 8, 16, 32, 8};

  SECTION("static: each new shape is recorded, then replayed") {
    auto s = run_loop(policy(gradd::graph_shape_policy::static_shapes), sweep);
    CHECK(s.plan_backwards == 10);
    CHECK(s.graph_recordings == 3);
    CHECK(s.graph_backwards == 7);
    CHECK(s.graphs == 3);
    // No shape twice in a row, yet steps 6-9 bet: each capture left its
    // graph pointing where the recorded step had its inputs, steps 3-5
    // found them there (proving each graph's addresses and learning its
    // probe), and from step 6 the probe names the graph (Note [Shape probe]).
    CHECK(s.graph_early_launches == 4);
    CHECK(s.graph_early_misses == 0);
  }
  SECTION("auto: a shape gets a graph once it recurs") {
    auto s = run_loop(policy(gradd::graph_shape_policy::auto_shapes), sweep);
    CHECK(s.graph_recordings == 3);  // the second sighting of each shape
    CHECK(s.graph_backwards == 4);   // the third and fourth sightings
    CHECK(s.graphs == 3);
  }
  SECTION("auto: a structure whose shapes keep changing stays on plans") {
    auto p = policy(gradd::graph_shape_policy::auto_shapes);
    p.cuda_graphs.dynamic_after = 2;
    auto s = run_loop(p, sweep);
    CHECK(s.graph_recordings == 0);
    CHECK(s.graph_backwards == 0);
    CHECK(s.plan_backwards == 10);
  }
  SECTION("dynamic: plans only") {
    auto s = run_loop(policy(gradd::graph_shape_policy::dynamic_shapes), sweep);
    CHECK(s.graph_recordings == 0);
    CHECK(s.graph_backwards == 0);
    CHECK(s.graphs == 0);
    CHECK(s.plan_backwards == 10);
  }
  SECTION("off: plans only") {
    auto p = policy(gradd::graph_shape_policy::static_shapes);
    p.cuda_graphs.enabled = false;
    auto s = run_loop(p, sweep);
    CHECK(s.graph_recordings + s.graph_backwards + s.graphs == 0);
  }
  SECTION("the least recently used graph goes beyond the cap") {
    auto p = policy(gradd::graph_shape_policy::static_shapes);
    p.cuda_graphs.max_graphs = 2;
    auto s = run_loop(p, sweep);
    CHECK(s.graphs == 2);
    CHECK(s.graph_evictions >= 1);
    CHECK(s.graph_recordings > 3);  // an evicted shape is recorded again
  }
  gradd::reset();
  CHECK(gradd::stats().graphs == 0);
}

TEST_CASE("the training thread does not wait for a capture", "[cuda][graphs]") {
  if (!have_cuda())
    return;
  auto p = policy(gradd::graph_shape_policy::static_shapes);
  p.compile.delay_ms = 500;  // each capture (and compile) waits this long first
  mlp m;
  auto params = m.parameters();
  gradd::reset();
  {
    gradd::enable_guard on{gradd::test::sync_settings()};
    m.loss(16, 0).backward();  // the plan, compiled synchronously and at once
  }
  gradd::enable_guard on{p};
  m.loss(16, 0).backward();  // recorded; its capture starts, and waits
  for (int i = 1; i <= 4; ++i)
    m.loss(16, i).backward();
  auto s = gradd::stats();
  CHECK(s.graph_recordings == 1);
  CHECK(s.backwards_during_capture == 4);  // served by the plan meanwhile
  CHECK(s.graph_backwards == 0);
  REQUIRE(gradd::wait_for_compiles());
  m.loss(16, 5).backward();
  CHECK(gradd::stats().graph_backwards == 1);
}

TEST_CASE("large saved tensors are read where they live (Note [Bound inputs])", "[cuda][graphs]") {
  if (!have_cuda())
    return;
  auto graphs = policy(gradd::graph_shape_policy::static_shapes);

  SECTION("activations of 2 MiB each: bound, not copied; gradients bitwise") {
    auto s = run_loop(graphs, {8192, 8192, 8192, 8192});
    CHECK(s.graph_backwards == 3);
    CHECK(s.graph_bound_bytes >= 6u * (2u << 20));  // three layers' inputs and GELU inputs
    // The capture left the graph pointing where the backward it was recorded
    // from had its inputs, and each step's allocations repeat the last's.
    CHECK(s.graph_rewrites == 0);
  }
  SECTION("a gradient that is the backward's own input is not bound") {
    // y = x + 1 passes the incoming gradient through: x's gradient is that
    // very input, which a bound graph would hand out from its (freed)
    // static buffer. The poisoned replay must catch it.
    auto x = torch::zeros({1 << 20}, torch::device(torch::kCUDA)).requires_grad_();
    gradd::reset();
    gradd::enable_guard on{graphs};
    for (int step = 0; step < 4; ++step) {
      INFO("step " << step);
      auto g = torch::randn({1 << 20}, torch::device(torch::kCUDA));
      x.mutable_grad() = Tensor();
      (x + 1).backward(g);
      require_bitwise_equal(g, x.grad());
      REQUIRE(gradd::wait_for_compiles());
    }
    auto s = gradd::stats();
    CHECK(s.graph_backwards == 3);
    CHECK(s.graph_bound_bytes == 0);
  }
}

TEST_CASE("a backward whose forward ran on a side stream replays there", "[cuda][graphs]") {
  if (!have_cuda())
    return;
  c10::Device device(c10::kCUDA, 0);
  c10::impl::VirtualGuardImpl cuda(c10::DeviceType::CUDA);
  auto side = cuda.getStreamFromGlobalPool(device);
  mlp m;
  auto params = m.parameters();
  auto step = [&] {
    Tensor loss;
    {
      c10::StreamGuard on_side(side);
      loss = m.loss(16, 0);
    }
    c10::Event forward_done(c10::DeviceType::CUDA);
    forward_done.record(side);
    forward_done.block(cuda.getStream(device));
    loss.backward();
    cuda.synchronizeStream(cuda.getStream(device));
    return std::vector<Tensor>{};
  };
  gradd::test::graphs_under_test_scope graphs;
  auto s = gradd::test::check_against_stock(params, step, 8);
  CHECK(s.graph_backwards == 7);
  // Served before libtorch's engine too, where the default stream must
  // wait for the side stream's replay before the gradients are read.
  CHECK(s.graph_hits_before_engine >= 1);
}

TEST_CASE("a backward kept for a capture lets go of its saved variables once recorded",
          "[cuda][graphs]") {
  if (!have_cuda())
    return;
  mlp m;
  gradd::reset();
  gradd::enable_guard on{policy(gradd::graph_shape_policy::static_shapes)};

  SECTION("without retain_graph they go, as on the stock engine") {
    auto loss = m.loss(16, 0);
    loss.backward();  // served by the plan, kept for the stream actor
    REQUIRE(gradd::wait_for_compiles());
    CHECK(gradd::stats().graph_recordings == 1);
    CHECK_THROWS_WITH(loss.backward(), Catch::Contains("second time"));
    // The mistake is the caller's: the structure keeps its graph. (Grads set
    // to None: whether `.grad` exists is part of a graph's shape.)
    gradd::test::clear_grads(m.parameters());
    m.loss(16, 1).backward();
    CHECK(gradd::stats().graph_backwards == 1);
  }
  SECTION("one changed in place raises as on the stock engine, and the structure keeps its graph") {
    m.loss(16, 0).backward();
    REQUIRE(gradd::wait_for_compiles());
    gradd::test::clear_grads(m.parameters());
    {
      // m.loss(16, 1) with the input of its square kept, then changed.
      auto x = m.hidden(16, 1);
      auto loss = x.square().mean();
      {
        torch::NoGradGuard no_grad;
        x.add_(1);
      }
      CHECK_THROWS_WITH(loss.backward(), Catch::Contains("modified by an inplace operation"));
    }
    gradd::test::clear_grads(m.parameters());
    m.loss(16, 2).backward();
    CHECK(gradd::stats().graph_backwards == 1);
  }
  SECTION("a graph hit lets go of them too, as the stock engine does") {
    m.loss(16, 0).backward();
    REQUIRE(gradd::wait_for_compiles());
    gradd::test::clear_grads(m.parameters());
    auto loss = m.loss(16, 1);
    auto in_use = [] {
      auto device = c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA).getDevice().index();
      return c10::getDeviceAllocator(c10::DeviceType::CUDA)
          ->getDeviceStats(device)
          .allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
          .current;
    };
    auto before = in_use();
    loss.backward();
    REQUIRE(gradd::stats().graph_backwards == 1);
    // A replay allocates nothing (the gradients are the graph's buffers), so
    // what backward() let go shows, with `loss` still held.
    CHECK(in_use() < before);
    CHECK_THROWS_WITH(loss.backward(), Catch::Contains("second time"));
    // (retain_graph is part of a structure's key, and such a structure is
    // never recorded: its backwards stay on plans, which keep them.)
  }
  SECTION("its nodes and hooks see the backward's own retain_graph, not the keeping") {
    // AOTAutograd's backward raises where it sees retain_graph with
    // donated buffers: a torch.compile'd region under the default policy.
    std::vector<bool> seen;
    auto x = m.hidden(16, 0);
    x.register_hook([&seen](const torch::Tensor& grad) {
      seen.push_back(torch::autograd::get_current_graph_task_keep_graph());
      return grad;
    });
    x.square().mean().backward();
    REQUIRE(gradd::wait_for_compiles());
    CHECK(gradd::stats().graph_recordings == 1);
    CHECK(seen == std::vector<bool>{false});
  }
  SECTION("with retain_graph they stay, and that backward is not recorded") {
    auto loss = m.loss(16, 0);
    loss.backward({}, /*retain_graph=*/true);
    REQUIRE(gradd::wait_for_compiles());
    // Recording swaps the nodes' saved variables on the stream actor's
    // thread, while a retained graph may run again (graph_path.cpp).
    CHECK(gradd::stats().graph_recordings == 0);
    CHECK_NOTHROW(loss.backward());
    REQUIRE(gradd::wait_for_compiles());
    CHECK(gradd::stats().graph_recordings == 1);  // the backward that frees them
  }
}

TEST_CASE("random numbers on the training thread while a stream actor captures",
          "[cuda][graphs]") {
  if (!have_cuda())
    return;
  auto p = policy(gradd::graph_shape_policy::static_shapes);
  p.compile.delay_ms = 0;
  mlp m;
  gradd::reset();
  gradd::enable_guard on{p};
  // Each new shape's capture runs while this thread draws random numbers
  // (what dropout does): neither may fail.
  for (int64_t batch : {8, 16, 24, 32}) {
    m.loss(batch, 0).backward();
    for (int i = 0; i < 200; ++i)
      torch::dropout(torch::ones({256}, torch::kCUDA), 0.5, true);
    REQUIRE(gradd::wait_for_compiles());
  }
  CHECK(gradd::stats().graph_capture_failures == 0);
  CHECK(gradd::stats().graphs == 4);
}

TEST_CASE("graphs follow reset(), the memory limit and replaced parameters", "[cuda][graphs]") {
  if (!have_cuda())
    return;
  mlp m;
  auto params = m.parameters();
  auto step = [&](int64_t batch) {
    gradd::test::clear_grads(params);
    m.loss(batch, 0).backward();
  };
  auto p = policy(gradd::graph_shape_policy::static_shapes);
  gradd::reset();

  SECTION("a capture in flight at reset() lands nowhere") {
    p.compile.delay_ms = 300;
    gradd::enable_guard on{p};
    step(16);  // its capture waits 300 ms
    gradd::reset();
    REQUIRE(gradd::wait_for_compiles());
    CHECK(gradd::stats().graphs == 0);
    step(16);  // a structure unknown again: compiled, then kept for a capture
    REQUIRE(gradd::wait_for_compiles());
    CHECK(gradd::stats().graph_recordings == 1);
    CHECK(gradd::stats().graphs == 1);
  }
  SECTION("no capture starts beyond memory_limit_mb") {
    p.cuda_graphs.memory_limit_mb = 1;
    gradd::enable_guard on{p};
    for (int64_t batch : {8, 16, 24}) {
      step(batch);
      REQUIRE(gradd::wait_for_compiles());
    }
    auto s = gradd::stats();
    REQUIRE(s.graph_bytes > (1u << 20));  // the first graph alone is over the limit
    CHECK(s.graphs == 1);
    CHECK(s.graph_recordings == 1);
    CHECK(s.plan_backwards == 3);
  }
  SECTION("a parameter at another address drops its graph, which is captured again") {
    gradd::enable_guard on{p};
    step(16);
    REQUIRE(gradd::wait_for_compiles());
    step(16);
    CHECK(gradd::stats().graph_backwards == 1);
    {
      torch::NoGradGuard no_grad;
      m.weights[0].set_data(m.weights[0].detach().clone());  // same values, new memory
    }
    step(16);  // the plan serves it; the graph goes, and this backward is kept for a new one
    REQUIRE(gradd::wait_for_compiles());
    CHECK(gradd::stats().graph_backwards == 1);
    CHECK(gradd::stats().graph_recordings == 2);
    step(16);
    CHECK(gradd::stats().graph_backwards == 2);
  }
  SECTION("parameters that keep moving keep their structure on plans") {
    // Two models of one structure trained in turn: each finds the other's
    // parameters in the graph, which goes, and a new one is recorded.
    mlp other;
    auto both = params;
    for (const auto& t : other.parameters())
      both.push_back(t);
    gradd::enable_guard on{p};
    uint64_t recorded_by_step_8 = 0;
    for (int i = 0; i < 14; ++i) {
      gradd::test::clear_grads(both);
      (i % 2 == 0 ? m : other).loss(16, 0).backward();
      REQUIRE(gradd::wait_for_compiles());
      if (i == 8)
        recorded_by_step_8 = gradd::stats().graph_recordings;
    }
    auto s = gradd::stats();
    CHECK(s.graph_recordings <= 4);
    CHECK(s.graph_recordings == recorded_by_step_8);  // none since: the structure stays on plans
    CHECK(s.plan_backwards + s.eager_backwards == 14);
  }
}

TEST_CASE("autograd::grad results keep the stock engine's layout through a graph",
          "[cuda][graphs]") {
  if (!have_cuda())
    return;
  // The gradient of an output read only by its sum is the sum's gradient
  // expanded (strides 0): a clone() of the graph's result made it
  // contiguous. compare_steps compares strides and offsets too.
  torch::manual_seed(6);
  auto w = (torch::randn({8, 8}, torch::device(torch::kCUDA)) * 0.5).requires_grad_();
  auto step = [&](size_t i) {
    // A tensor, not a scalar, changes from step to step: a scalar saved by
    // an op is part of the structure's key, and each step would be new.
    auto scale = torch::full({8, 8}, 0.5 * static_cast<double>(i + 1), w.options());
    auto hidden = torch::tanh(w * scale);
    auto out = hidden.flip(0);
    auto loss = out.sum() * 2.0 + hidden.square().sum();
    return torch::autograd::grad({loss}, {w, out});
  };
  {
    gradd::disable_guard off;
    CHECK(step(0)[1].strides() == c10::IntArrayRef{0, 0});
  }
  auto s = gradd::test::compare_steps(policy(gradd::graph_shape_policy::static_shapes), 4, step);
  CHECK(s.graph_backwards > 0);
}

TEST_CASE("with CUDA graphs on, CPU backwards stay on plans, bitwise", "[graphs]") {
  torch::manual_seed(4);
  std::vector<Tensor> w{torch::randn({16, 16}, torch::kFloat64).requires_grad_(),
                        torch::randn({16}, torch::kFloat64).requires_grad_()};
  auto x = torch::randn({8, 16}, torch::kFloat64);
  gradd::test::graphs_under_test_scope graphs;  // graph_settings(): static shapes
  auto s = gradd::test::check_against_stock(w, [&] {
    torch::tanh(torch::addmm(w[1], x, w[0])).square().sum().backward();
    return std::vector<Tensor>{};
  }, 3);
  CHECK(s.plan_backwards == 3);
  CHECK(s.graph_backwards + s.graph_recordings + s.backwards_during_capture + s.graphs == 0);
}

TEST_CASE("graph_stats says what CUDA graphs cover of each structure", "[cuda][graphs]") {
  if (!have_cuda())
    return;
  auto only = [] {
    auto all = gradd::graph_stats();
    REQUIRE(all.size() == 1);
    return all[0];
  };
  SECTION("a structure served by graphs: one per shape, every backward after its capture") {
    run_loop(policy(gradd::graph_shape_policy::static_shapes), {8, 16, 8, 16, 8});
    auto g = only();
    CHECK(g.cuda_graphs == 2);
    CHECK(g.graph_backwards == 3);
    CHECK(g.graph_kernels > 0);
    CHECK(g.plans_only.empty());
  }
  SECTION("a hook on a node taken as a result keeps its structure on plans, named") {
    mlp m;
    auto params = m.parameters();
    auto hooked = [&](size_t step) {
      auto x = m.hidden(8, static_cast<int64_t>(step), 1);
      x.register_hook([](Tensor g) { return g * 2; });  // on the node that captures x's gradient
      auto loss = torch::gelu(torch::addmm(m.biases[1], x, m.weights[1])).square().mean();
      return torch::autograd::grad({loss}, {x, m.weights[1]});
    };
    gradd::test::compare_steps(policy(gradd::graph_shape_policy::static_shapes), 3, hooked);
    auto g = only();
    CHECK(g.cuda_graphs == 0);
    CHECK(g.graph_backwards == 0);
    CHECK_THAT(g.plans_only, Catch::Matchers::EndsWith("(GeluBackward0) has hooks"));
  }
}

namespace {

/// `x * number` as Python writes it: the number wrapped into a 0-dim CPU
/// tensor, which MulBackward0 saves.
Tensor times_python_number(const Tensor& x, double number) {
  auto wrapped = torch::scalar_tensor(number, torch::kFloat64);
  wrapped.unsafeGetTensorImpl()->set_wrapped_number(true);
  return x * wrapped;
}

} // namespace

TEST_CASE("Python numbers saved by a backward: a graph per value, bitwise", "[cuda][graphs]") {
  if (!have_cuda())
    return;
  // Note [Python scalars in graphs]: the graph keeps the value it was
  // captured with, so each value is a shape of its own.
  mlp m;
  auto params = m.parameters();
  const std::vector<double> numbers{0.5, 0.5, 0.5, 0.25, 0.25, 0.5, 0.25};
  auto step = [&](size_t i) {
    clear_grads(params);
    auto h = m.hidden(8, static_cast<int64_t>(i));
    times_python_number(h, numbers[i]).square().mean().backward();
    return grads_of(params);
  };
  auto s = gradd::test::compare_steps(policy(gradd::graph_shape_policy::static_shapes),
                                      numbers.size(), step);
  CHECK(s.graph_backwards >= 4);
  auto all = gradd::graph_stats();
  REQUIRE(all.size() == 1);
  CHECK(all[0].plans_only.empty());
  CHECK(all[0].cuda_graphs == 2);
}

TEST_CASE("a saved conjugate view keeps its structure on plans, bitwise", "[cuda][graphs]") {
  if (!have_cuda())
    return;
  torch::manual_seed(0);
  auto w = torch::randn({4, 4}, torch::dtype(torch::kComplexFloat).device(torch::kCUDA))
               .requires_grad_();
  auto step = [&] {
    w.mutable_grad() = torch::Tensor();
    w.mm(w.conj().t()).abs().sum().backward();  // mm saves the lazy conjugate
    return std::vector<torch::Tensor>{w.grad().clone()};
  };
  auto stock = step();
  gradd::reset();
  gradd::enable_guard on{policy(gradd::graph_shape_policy::static_shapes)};
  for (int i = 0; i < 4; ++i) {
    INFO("step " << i);
    require_bitwise_equal(stock, step());
    REQUIRE(gradd::wait_for_compiles());
  }
  CHECK(gradd::stats().graph_backwards == 0);
  CHECK(gradd::stats().plan_backwards == 4);
}
