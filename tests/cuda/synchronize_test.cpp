// Device synchronizes while gradd captures CUDA graphs in the background
// (Note [Device synchronizes during captures], cuda/capture_gate.hpp): the
// synchronize waits for the capture in flight, and neither fails. Host
// reads, pinned allocations and emptied caches on another thread need no
// gate: captures run in thread-local mode on a non-blocking stream.

#include "cuda/graph_loop.hpp"

#include <c10/cuda/CUDACachingAllocator.h>

#include <atomic>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>

using gradd::test::clear_grads;
using gradd::test::have_cuda;
using gradd::test::mlp;
using gradd::test::policy;
using gradd::test::run_loop;

TEST_CASE("a training loop that synchronizes the device every step keeps its captures",
          "[cuda][graphs]") {
  if (!have_cuda())
    return;
  mlp m;
  auto params = m.parameters();
  gradd::reset();
  gradd::enable_guard on{policy(gradd::graph_shape_policy::static_shapes)};
  // Four shapes in turn: each is captured while the next steps run and
  // synchronize, without waiting for the capture.
  for (int64_t step = 0; step < 40; ++step) {
    INFO("step " << step);
    clear_grads(params);
    m.loss(int64_t{8} << (step % 4), step).backward();
    torch::cuda::synchronize();  // as a loop that times its steps does
  }
  REQUIRE(gradd::wait_for_compiles());
  auto s = gradd::stats();
  CHECK(s.graph_capture_failures == 0);
  CHECK(s.graphs == 4);
  CHECK(s.graph_backwards > 0);
}

namespace {

/// What another thread did while a loop had its shapes captured.
struct beside_loop {
  gradd::statistics loop;  ///< the loop's statistics
  uint64_t rounds = 0;     ///< times the other thread ran its work
  std::string error;       ///< the first error its work raised, if any
};

/// Runs four shapes twice through run_loop, each new one captured in the
/// background, while another thread repeats `work`; every step's gradients
/// are the stock engine's.
beside_loop run_loop_beside(const std::function<void()>& work) {
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> rounds{0};
  beside_loop out;
  std::thread other([&] {
    try {
      while (!stop.load()) {
        work();
        rounds.fetch_add(1);
      }
    } catch (const std::exception& e) {
      out.error = e.what();
    }
  });
  try {
    out.loop = run_loop(policy(gradd::graph_shape_policy::static_shapes),
                        {8, 16, 32, 48, 8, 16, 32, 48});
  } catch (...) {
    stop = true;
    other.join();
    throw;
  }
  stop = true;
  other.join();
  out.rounds = rounds.load();
  return out;
}

} // namespace

TEST_CASE("device synchronizes on another thread wait for captures", "[cuda][graphs]") {
  if (!have_cuda())
    return;
  auto r = run_loop_beside([] { torch::cuda::synchronize(); });
  CHECK(r.error.empty());
  CHECK(r.rounds > 0);
  CHECK(r.loop.graph_capture_failures == 0);
  CHECK(r.loop.graph_recordings == 4);
  CHECK(r.loop.graph_backwards == 4);
}

TEST_CASE("host reads, pinned memory and emptied caches on another thread leave captures alone",
          "[cuda][graphs]") {
  if (!have_cuda())
    return;
  // What a data loader or a metrics thread does while gradd captures in
  // the background: each call synchronizes with the host or allocates
  // host memory the device can reach, and none may fail or spoil a capture.
  auto on = torch::dtype(torch::kFloat32).device(torch::kCUDA);
  auto r = run_loop_beside([&] {
    auto t = torch::full({1 << 16}, 2.0, on);
    auto sum = t.sum().item<double>();
    auto pinned = torch::empty({1 << 16}, torch::dtype(torch::kFloat32).pinned_memory(true));
    pinned.copy_(t);
    if (sum != 2.0 * (1 << 16) || pinned[7].item<float>() != 2.0f)
      throw std::runtime_error("wrong values");
    c10::cuda::CUDACachingAllocator::emptyCache();
  });
  CHECK(r.error.empty());
  CHECK(r.rounds > 0);
  CHECK(r.loop.graph_capture_failures == 0);
  CHECK(r.loop.graph_backwards == 4);
}
