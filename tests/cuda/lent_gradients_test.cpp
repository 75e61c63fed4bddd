// Lent gradients and the caching allocator (Note [Lent gradients],
// cuda/lent_gradients.cpp): a buffer recorded as used on a stream goes
// back to the pool only after the reads queued there.

#include "cuda/graph_loop.hpp"
#include "cuda/lent_gradients.hpp"

#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>

using gradd::test::have_cuda;

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
