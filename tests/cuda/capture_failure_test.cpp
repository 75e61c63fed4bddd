// What a CUDA graph capture that fails leaves: a host sync keeps the
// structure on plans; running out of device memory keeps only the shape
// there (cuda/stream_actor.cpp). Gradients are compared bitwise with the
// stock engine's.

#include "cuda/graph_loop.hpp"

#include <c10/core/CachingDeviceAllocator.h>

#include <chrono>
#include <map>
#include <thread>

using gradd::test::have_cuda;
using gradd::test::policy;
using gradd::test::require_bitwise_equal;
using torch::Tensor;

namespace {

/// A custom function whose backward reads a value on the host: it runs on
/// a plan, but a CUDA graph cannot capture it.
struct host_sync : torch::autograd::Function<host_sync> {
  static Tensor forward(torch::autograd::AutogradContext*, Tensor a) { return a * 2; }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                 torch::autograd::variable_list grads) {
    double scale = grads[0].abs().max().item<double>() > 0 ? 2.0 : 2.0;
    return {grads[0] * scale};
  }
};

/// Takes all but `spare` bytes of `device`'s free memory, the allocator's
/// cache emptied first: an allocation beyond `spare` then fails.
Tensor ballast(c10::Device device, size_t spare) {
  auto* allocator = c10::getDeviceAllocator(c10::kCUDA);
  allocator->emptyCache();
  auto free = allocator->getMemoryInfo(device.index()).first;
  return torch::empty({static_cast<int64_t>(free - spare)}, torch::dtype(torch::kUInt8).device(device));
}

} // namespace

TEST_CASE("a capture that fails leaves its structure on plans", "[cuda][graphs]") {
  if (!have_cuda())
    return;
  torch::manual_seed(9);
  auto w = torch::randn({32, 32}, torch::dtype(torch::kFloat32).device(torch::kCUDA))
               .requires_grad_();
  gradd::test::graphs_under_test_scope graphs;
  auto s = gradd::test::check_against_stock({w}, [&] {
    host_sync::apply(torch::tanh(w.mm(w))).sum().backward();
    return std::vector<Tensor>{};
  }, 4);
  CHECK(s.graph_backwards == 0);
  CHECK(s.graph_recordings <= 1);  // recorded at most once, then never again
  CHECK(s.plan_backwards == 4);
}

TEST_CASE("a capture out of memory leaves its shape on plans for a while, the other shapes on "
          "their graphs",
          "[cuda][graphs]") {
  if (!have_cuda())
    return;
  // A larger batch whose capture finds no device memory says nothing of
  // the structure, as a host sync would.
  constexpr int64_t width = 4096;
  constexpr int64_t small = 4;
  constexpr int64_t large = 1 << 14;  // 256 MiB a tensor
  auto w = torch::randn({width}, torch::device(torch::kCUDA)).requires_grad_();
  auto step = [&](int64_t rows, int64_t seed) {
    w.mutable_grad() = Tensor();
    auto x = torch::sin(torch::arange(rows * width, torch::device(torch::kCUDA))
                            .reshape({rows, width}) * (0.001 * seed));
    (x * w).square().mean().backward();
    return gradd::test::exact_copy(w.grad());
  };
  std::map<std::pair<int64_t, int64_t>, Tensor> stock;
  {
    gradd::disable_guard off;
    for (auto [rows, seed] : {std::pair{small, 1}, {small, 3}, {large, 2}, {large, 4}, {small, 5},
                              {large, 6}, {large, 8}})
      stock[{rows, seed}] = step(rows, seed);
  }
  auto expect_stock = [&](int64_t rows, int64_t seed) {
    INFO("rows " << rows << ", seed " << seed);
    require_bitwise_equal(stock.at({rows, seed}), step(rows, seed));
  };
  auto p = policy(gradd::graph_shape_policy::static_shapes);
  p.compile.delay_ms = 1000;  // each capture waits this long first
  p.fallback.retry_after_ms = 500;
  gradd::reset();
  {
    gradd::enable_guard on{gradd::test::sync_settings()};
    expect_stock(small, 1);  // the plan, compiled synchronously and at once
  }
  gradd::enable_guard on{p};
  expect_stock(small, 1);  // recorded and captured
  REQUIRE(gradd::wait_for_compiles());
  expect_stock(small, 3);
  REQUIRE(gradd::stats().graph_backwards == 1);

  expect_stock(large, 2);  // recorded; its capture waits
  {
    auto full = ballast(w.device(), size_t{64} << 20);
    REQUIRE(gradd::wait_for_compiles());
  }
  CHECK(gradd::stats().graph_capture_failures == 1);
  CHECK(gradd::stats().graphs == 1);
  auto recordings = gradd::stats().graph_recordings;
  expect_stock(large, 4);  // its plan, not recorded again
  CHECK(gradd::stats().graph_recordings == recordings);
  expect_stock(small, 5);  // its graph still
  CHECK(gradd::stats().graph_backwards == 2);

  // Memory comes free, and after fallback.retry_after_ms the shape is
  // captured again.
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  expect_stock(large, 6);
  CHECK(gradd::stats().graph_recordings == recordings + 1);
  REQUIRE(gradd::wait_for_compiles());
  CHECK(gradd::stats().graphs == 2);
  CHECK(gradd::stats().graph_capture_failures == 1);
  expect_stock(large, 8);
  CHECK(gradd::stats().graph_backwards == 3);
}
