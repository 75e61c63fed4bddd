// Kernels of the tests' own whose arguments a replay rewrites (Note [Bound
// inputs]), each in a loop whose saved tensors may move between steps:
// - a kernel handed its input's address moved back before the input (as a
//   kernel with a padding may be) must read the live tensor on every
//   replay: such a pointer is found by how it moved between the graph and
//   its twin, not by where it points;
// - a kernel's dynamic shared memory limit belongs to the kernel and to
//   the library that launches it, not to a graph: where a library lowers it
//   below what a captured node asks for, the driver refuses that node's new
//   arguments. gradd does not raise the limit back (once it did, and on a
//   Hopper GPU such a raise lowered the limit cuDNN had set for its batch-norm
//   backward, whose next launches failed on every thread: docs/design.md,
//   Known gaps); the plan serves, and the shape's next graph copies the
//   inputs that kernel reads, from the nodes holding them where it
//   launches early. A capture leaves the graph pointing where the backward
//   it was recorded from had its inputs, so a loop whose tensors do not
//   move never asks the driver for new arguments.

#include "cuda/graph_loop.hpp"

#ifdef GRADD_TEST_KERNELS
#include "cuda/read_before.hpp"
#include "cuda/square_loop.hpp"
#include "cuda/staged_scale.hpp"

namespace {

/// 2x through the pointer 256 bytes before x.
void twice_from_before(const float* x, float* out, int64_t n, cudaStream_t stream) {
  gradd::test::scale_through_earlier_pointer(x, 64, 2.0f, out, n, stream);
}

/// 2x staged through 64 KiB of dynamic shared memory.
void twice_staged(const float* x, float* out, int64_t n, cudaStream_t stream) {
  gradd::test::scale_staged(x, 2.0f, out, n, stream);
}

/// d (saved by the product) and x = w * d, which only the kernel reads:
/// the bytes of both, read where they live.
constexpr size_t both_saved_bytes = 2 * 256 * 1024 * sizeof(float);

} // namespace

TEST_CASE("a kernel handed its input's address moved back reads the live tensor",
          "[cuda][graphs]") {
  if (!gradd::test::have_cuda())
    return;
  const std::vector<bool> moves{false, false, false, true, false, true, true, false};
  auto s = gradd::test::run_square_loop<twice_from_before>(moves);
  CHECK(s.graph_backwards == moves.size() - 1);  // the first is recorded for the capture
  CHECK(s.graph_bound_bytes >= both_saved_bytes);
}

TEST_CASE("a refused rebind leaves the kernel's shared memory limit to its library",
          "[cuda][graphs]") {
  if (!gradd::test::have_cuda())
    return;
  // From step 2 on the limit is lowered before each step, as a smaller
  // launch elsewhere would, and the kernel raises it itself when it runs.
  // The graph serves steps 1 and 2; step 3's tensors moved, its rebind is
  // refused under the lowered limit, the graph is dropped, and step 3's
  // plan records the shape again; the new graph, copying the input the
  // staged kernel reads (x) and reading d where it lives, serves steps 4
  // to 10. Steps 8-10 do not move: step 9 proves the addresses, and step
  // 10 launches early, copying x from the node that holds it (Note [Early
  // launch]). Raising the limit to the node's need would have let the
  // first graph serve every step.
  const std::vector<bool> moves{false, false, false, true,  false, true,
                                false, true,  false, false, false};
  auto s = gradd::test::run_square_loop<twice_staged>(moves, [](size_t step) {
    if (step >= 2)
      gradd::test::limit_staging(0);
  });
  CHECK(s.graph_backwards == moves.size() - 2);
  CHECK(s.graph_captures == 2);
  CHECK(s.graph_bound_bytes >= both_saved_bytes / 2);  // d, not x
  CHECK(s.graph_bound_bytes < both_saved_bytes);
  CHECK(s.graph_early_launches >= 1);
}

TEST_CASE("a graph left pointing at the recorded backward's inputs needs no rebind",
          "[cuda][graphs]") {
  if (!gradd::test::have_cuda())
    return;
  // The limit is lowered after the step recorded for the capture, as a
  // launch of another shape would. Nothing moves, so no replay asks for
  // new arguments, and none is refused.
  const std::vector<bool> moves(8, false);
  auto s = gradd::test::run_square_loop<twice_staged>(moves, [](size_t step) {
    if (step >= 1)
      gradd::test::limit_staging(0);
  });
  CHECK(s.graph_backwards == moves.size() - 1);
  CHECK(s.graph_captures == 1);
  CHECK(s.graph_rewrites == 0);
  CHECK(s.graph_bound_bytes >= both_saved_bytes);
}
#else
TEST_CASE("the CUDA graph cases with test kernels of their own", "[cuda][graphs]") {
  WARN("built without the CUDA toolkit's compiler: the test kernels are missing, cases skipped");
}
#endif
