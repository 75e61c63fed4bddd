// A kernel handed its input's address moved back before the input (as a
// kernel with a padding may be) must read the live tensor on every replay:
// Note [Bound inputs] finds such a pointer by how it moved between the
// graph and its twin, not by where it points.

#include "cuda/graph_loop.hpp"

#ifdef GRADD_TEST_KERNELS
#include "cuda/read_before.hpp"

#include <c10/cuda/CUDAStream.h>
#endif

namespace {

using gradd::test::have_cuda;
using torch::Tensor;

#ifdef GRADD_TEST_KERNELS
/// x², whose backward computes 2x by read_before.hpp's kernel.
struct square_read_from_before : torch::autograd::Function<square_read_from_before> {
  static constexpr int64_t skip = 64;  // 256 bytes before x

  static Tensor forward(torch::autograd::AutogradContext* ctx, Tensor x) {
    ctx->save_for_backward({x});
    return x * x;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto x = ctx->get_saved_variables()[0].contiguous();
    auto twice = torch::empty_like(x);
    gradd::test::scale_through_earlier_pointer(x.const_data_ptr<float>(), skip, 2.0f,
                                               twice.mutable_data_ptr<float>(), x.numel(),
                                               c10::cuda::getCurrentCUDAStream().stream());
    return {grads[0] * twice};
  }
};
#endif

} // namespace

TEST_CASE("a kernel handed its input's address moved back reads the live tensor",
          "[cuda][graphs]") {
  if (!have_cuda())
    return;
#ifndef GRADD_TEST_KERNELS
  WARN("built without the CUDA toolkit's compiler: the test kernel is missing, case skipped");
#else
  auto on = torch::dtype(torch::kFloat32).device(torch::kCUDA);
  torch::manual_seed(3);
  auto w = torch::randn({256, 1024}, on).requires_grad_();
  const std::vector<bool> moves{false, false, false, true, false, true, true, false};
  auto step = [&](size_t i) {
    w.mutable_grad() = Tensor();
    // Held through the step, it takes the memory the step's tensors had.
    auto held = moves[i] ? torch::empty({256, 1024, 3}, on) : Tensor();
    auto d = torch::sin(torch::arange(256 * 1024, on).reshape({256, 1024}) * (0.01 * (i + 1)));
    square_read_from_before::apply(w * d).sum().backward();
    return std::vector<Tensor>{gradd::test::exact_copy(w.grad())};
  };
  auto s = gradd::test::compare_steps(
      gradd::test::policy(gradd::graph_shape_policy::static_shapes), moves.size(), step,
      [&](size_t i) { return "step " + std::to_string(i) + (moves[i] ? ", its tensors moved" : ""); });
  CHECK(s.graph_backwards == moves.size() - 1);  // the first is recorded for the capture
  // d (saved by the product) and x = w * d, which only the kernel reads,
  // through the pointer 256 bytes before it: both are read where they live.
  CHECK(s.graph_bound_bytes >= 2 * w.nbytes());
#endif
}
