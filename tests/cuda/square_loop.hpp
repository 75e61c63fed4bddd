#pragma once

// x² through a test kernel of the case's own, in a loop whose tensors move
// at chosen steps: what the [cuda] cases with kernels of their own share.

#include "cuda/graph_loop.hpp"

#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <functional>
#include <string>
#include <vector>

namespace gradd::test {

/// out[i] = 2 x[i] for i < n, launched on `stream`.
using twice_kernel = void (*)(const float* x, float* out, int64_t n, cudaStream_t stream);

/// x², whose backward computes 2x with `Twice`.
template <twice_kernel Twice>
struct square_by : torch::autograd::Function<square_by<Twice>> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x) {
    ctx->save_for_backward({x});
    return x * x;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto x = ctx->get_saved_variables()[0].contiguous();
    auto twice = torch::empty_like(x);
    Twice(x.const_data_ptr<float>(), twice.mutable_data_ptr<float>(), x.numel(),
          c10::cuda::getCurrentCUDAStream().stream());
    return {grads[0] * twice};
  }
};

/// Runs steps of `square_by<Twice>(w * d).sum()`, w a 256 × 1024
/// parameter and d new each step, through compare_steps under static
/// shapes. At a step where `moves` says so, blocks of the size of the
/// step's own tensors are held through it, taking the places those would
/// have had. `before(step)` runs first in each step.
template <twice_kernel Twice>
statistics run_square_loop(const std::vector<bool>& moves,
                           const std::function<void(size_t)>& before = {}) {
  auto on = torch::dtype(torch::kFloat32).device(torch::kCUDA);
  torch::manual_seed(3);
  auto w = torch::randn({256, 1024}, on).requires_grad_();
  auto step = [&](size_t i) {
    w.mutable_grad() = torch::Tensor();
    if (before)
      before(i);
    std::vector<torch::Tensor> held;
    for (int k = 0; moves[i] && k < 3; ++k)
      held.push_back(torch::empty({256, 1024}, on));
    auto d = torch::sin(torch::arange(256 * 1024, on).reshape({256, 1024}) * (0.01 * (i + 1)));
    square_by<Twice>::apply(w * d).sum().backward();
    return std::vector<torch::Tensor>{exact_copy(w.grad())};
  };
  return compare_steps(policy(graph_shape_policy::static_shapes), moves.size(), step,
                       [&](size_t i) {
                         return "step " + std::to_string(i) + (moves[i] ? ", its tensors moved" : "");
                       });
}

} // namespace gradd::test
