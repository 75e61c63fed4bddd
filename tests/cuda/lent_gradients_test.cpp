// Lent gradients (Note [Lent gradients], cuda/lent_gradients.cpp): held
// ones keep their values and accumulation is exact, and with the caching
// allocator a buffer recorded as used on a stream goes back to the pool
// only after the reads queued there.

#include "cuda/graph_loop.hpp"
#include "cuda/lent_gradients.hpp"

#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>

using gradd::test::have_cuda;
using gradd::test::mlp;
using gradd::test::policy;
using gradd::test::require_bitwise_equal;
using torch::Tensor;

namespace {

/// 16 MiB: a segment of its own, so that a freed buffer is the one free
/// block of its stream that fits the next allocation of its size.
constexpr int64_t buffer_floats = int64_t{1} << 22;

/// Where the freed memory of a graph's buffer, lent and handed out on
/// `training`, lies against the next allocation of its size on the
/// buffer's own stream, while `training` is still busy with a queued read:
/// true where the allocator gave that memory out again.
bool reused_under_queued_read(bool record_training) {
  auto side = c10::cuda::getStreamFromPool();
  auto training = c10::cuda::getStreamFromPool();
  c10::cuda::CUDAStreamGuard on_side(side);
  c10::cuda::CUDACachingAllocator::emptyCache();
  const void* freed_at = nullptr;
  {
    gradd::cuda::lent_gradients lent;
    auto buffer = torch::zeros({buffer_floats}, torch::device(torch::kCUDA));
    freed_at = buffer.const_data_ptr();
    lent.lend(buffer);
    if (record_training)
      lent.record_use_on(training);
    c10::cuda::CUDAStreamGuard on_training(training);
    at::cuda::sleep(int64_t{1} << 30);  // a holder's read, still queued
  }
  auto next = torch::empty({buffer_floats}, torch::device(torch::kCUDA));
  bool reused = next.const_data_ptr() == freed_at;
  training.synchronize();
  return reused;
}

} // namespace

TEST_CASE("a lent buffer goes back to the pool after the reads queued on its recorded streams",
          "[cuda][graphs]") {
  if (!have_cuda())
    return;
  // The control: unrecorded, the allocator hands the memory out at once.
  CHECK(reused_under_queued_read(false));
  CHECK_FALSE(reused_under_queued_read(true));
}

TEST_CASE("lent buffers are recorded once per stream", "[cuda][graphs]") {
  if (!have_cuda())
    return;
  auto capture_stream = c10::cuda::getStreamFromPool();
  auto training = c10::cuda::getStreamFromPool();
  auto other = c10::cuda::getStreamFromPool();
  c10::cuda::CUDAStreamGuard on_capture(capture_stream);
  gradd::cuda::lent_gradients lent;
  lent.lend(torch::zeros({16}, torch::device(torch::kCUDA)));
  lent.record_use_on(training);  // at capture
  lent.hand_out_on(training);
  REQUIRE(lent.recorded_on().size() == 1);
  CHECK(lent.handed_out_on() == training);
  lent.hand_out_on(other);
  lent.hand_out_on(training);
  CHECK(lent.recorded_on().size() == 2);
  CHECK(lent.handed_out_on() == training);
}

TEST_CASE("lent gradients: held ones keep their values, accumulation is exact", "[cuda][graphs]") {
  if (!have_cuda())
    return;
  auto graphs = policy(gradd::graph_shape_policy::static_shapes);

  SECTION("a gradient held across iterations is not overwritten") {
    mlp m;
    auto params = m.parameters();
    gradd::reset();
    gradd::enable_guard on{graphs};
    std::vector<Tensor> held;
    std::vector<Tensor> copies;
    for (int step = 0; step < 4; ++step) {
      gradd::test::clear_grads(params);
      m.loss(16, step).backward();
      REQUIRE(gradd::wait_for_compiles());
      held.push_back(params[0].grad());  // a hook or a logger keeps it
      copies.push_back(gradd::test::exact_copy(params[0].grad()));
    }
    CHECK(gradd::stats().graph_backwards >= 2);
    CHECK(gradd::stats().graph_copy_on_writes >= 1);
    for (size_t i = 0; i < held.size(); ++i) {
      INFO("step " << i);
      require_bitwise_equal(copies[i], gradd::test::exact_copy(held[i]));
    }
  }
  SECTION("zero_grad(set_to_none=False) and micro-batches accumulate as the stock engine") {
    mlp m;
    auto params = m.parameters();
    auto loop = [&] {
      std::vector<std::vector<Tensor>> seen;
      gradd::test::clear_grads(params);
      for (int step = 0; step < 3; ++step) {
        for (auto& p : params)
          if (p.grad().defined())
            p.mutable_grad().zero_();
        for (int micro = 0; micro < 2; ++micro)  // two micro-batches per step
          m.loss(16, step * 2 + micro).backward();
        seen.push_back(gradd::test::grads_of(params));
        REQUIRE(gradd::wait_for_compiles());
      }
      return seen;
    };
    std::vector<std::vector<Tensor>> stock;
    {
      gradd::disable_guard off;
      stock = loop();
    }
    gradd::reset();
    gradd::enable_guard on{graphs};
    auto ours = loop();
    CHECK(gradd::stats().graph_backwards >= 3);
    for (size_t i = 0; i < stock.size(); ++i) {
      INFO("step " << i);
      require_bitwise_equal(stock[i], ours[i]);
    }
  }
}
