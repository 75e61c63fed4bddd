#pragma once

// A CUDA training loop run on the stock engine and then under a CUDA-graph
// policy, gradients compared bitwise after every step: what the [cuda]
// graph cases share.

#include "engine/grad_check.hpp"

#include <functional>
#include <string>
#include <vector>

namespace gradd::test {

/// A small MLP on CUDA whose batch size is a parameter of each step.
struct mlp {
  mlp() {
    torch::manual_seed(5);
    auto on = torch::dtype(torch::kFloat32).device(torch::kCUDA);
    for (int i = 0; i < 3; ++i) {
      weights.push_back((torch::randn({64, 64}, on) * 0.1).requires_grad_());
      biases.push_back(torch::zeros({64}, on).requires_grad_());
    }
  }
  std::vector<torch::Tensor> parameters() const {
    auto all = weights;
    all.insert(all.end(), biases.begin(), biases.end());
    return all;
  }
  /// The output of all layers for a batch.
  torch::Tensor hidden(int64_t batch, int64_t step) const {
    return hidden(batch, step, weights.size());
  }
  /// The output of the first `layers` layers alone.
  torch::Tensor hidden(int64_t batch, int64_t step, size_t layers) const {
    auto x = torch::sin(torch::arange(batch * 64, torch::dtype(torch::kFloat32).device(torch::kCUDA))
                            .reshape({batch, 64}) * (0.01 * (step + 1)));
    for (size_t i = 0; i < layers; ++i)
      x = torch::gelu(torch::addmm(biases[i], x, weights[i]));
    return x;
  }
  torch::Tensor loss(int64_t batch, int64_t step) const {
    return hidden(batch, step).square().mean();
  }
  std::vector<torch::Tensor> weights, biases;
};

/// One step of a loop: a fresh forward and backward, and what it left to
/// compare (the gradients).
using loop_step = std::function<std::vector<torch::Tensor>(size_t step)>;

/// Runs `steps` steps of `step` on the stock engine and then under
/// `policy`; requires bitwise-equal results after every step, each failure
/// named by `describe` (the step's number without it). Returns gradd's
/// statistics.
inline gradd::statistics compare_steps(const gradd::settings& policy, size_t steps,
                                       const loop_step& step,
                                       const std::function<std::string(size_t)>& describe = {}) {
  std::vector<std::vector<torch::Tensor>> stock;
  {
    gradd::disable_guard off;
    for (size_t i = 0; i < steps; ++i)
      stock.push_back(step(i));
  }
  gradd::reset();
  gradd::enable_guard on{policy};
  for (size_t i = 0; i < steps; ++i) {
    INFO((describe ? describe(i) : "step " + std::to_string(i)));
    require_bitwise_equal(stock[i], step(i));
    REQUIRE(gradd::wait_for_compiles());
  }
  return gradd::stats();
}

/// Before each step of run_loop: a tensor to hold through that step (which
/// moves the step's own tensors to other addresses), or none.
using before_step = std::function<torch::Tensor(size_t step)>;

/// Runs `batches` of the mlp (one backward each, grads set to None before
/// each) through compare_steps.
inline gradd::statistics run_loop(const gradd::settings& policy, const std::vector<int64_t>& batches,
                           const before_step& before = {}) {
  mlp m;
  auto params = m.parameters();
  auto step = [&](size_t i) {
    clear_grads(params);
    auto held = before ? before(i) : torch::Tensor();
    m.loss(batches[i], static_cast<int64_t>(i)).backward();
    return grads_of(params);
  };
  return compare_steps(policy, batches.size(), step, [&](size_t i) {
    return "step " + std::to_string(i) + ", batch " + std::to_string(batches[i]);
  });
}

inline gradd::settings policy(gradd::graph_shape_policy mode) {
  auto s = graph_settings();
  s.cuda_graphs.mode = mode;
  return s;
}

inline bool have_cuda() {
  if (torch::cuda::is_available())
    return true;
  WARN("CUDA not available: CUDA graph case skipped");
  return false;
}

} // namespace gradd::test
