// A kernel handed its input's address moved back before the input (as a
// kernel with a padding may be) must read the live tensor on every replay:
// Note [Bound inputs] finds such a pointer by how it moved between the
// graph and its twin, not by where it points.

#include "cuda/graph_loop.hpp"

#ifdef GRADD_TEST_KERNELS
#include "cuda/read_before.hpp"
#include "cuda/square_loop.hpp"

namespace {

/// 2x through the pointer 256 bytes before x.
void twice_from_before(const float* x, float* out, int64_t n, cudaStream_t stream) {
  gradd::test::scale_through_earlier_pointer(x, 64, 2.0f, out, n, stream);
}

} // namespace
#endif

TEST_CASE("a kernel handed its input's address moved back reads the live tensor",
          "[cuda][graphs]") {
  if (!gradd::test::have_cuda())
    return;
#ifndef GRADD_TEST_KERNELS
  WARN("built without the CUDA toolkit's compiler: the test kernel is missing, case skipped");
#else
  const std::vector<bool> moves{false, false, false, true, false, true, true, false};
  auto s = gradd::test::run_square_loop<twice_from_before>(moves);
  CHECK(s.graph_backwards == moves.size() - 1);  // the first is recorded for the capture
  // d (saved by the product) and x = w * d, which only the kernel reads,
  // through the pointer 256 bytes before it: both are read where they live.
  CHECK(s.graph_bound_bytes >= 2 * 256 * 1024 * sizeof(float));
#endif
}
