// A program that uses gradd from its installed CMake package, as a user's
// program would (see CMakeLists.txt beside it).
//
// Each step computes a tiny MLP's gradients on one batch twice: with the
// stock engine (gradd disabled), then with gradd. They must be equal, bit
// for bit. After each step it lets gradd's compiles land, so from the second
// step on a plan serves gradd's backward. Exits non-zero if a gradient
// differs or no backward ran on a plan.

#include "gradd/gradd.hpp"

#include <torch/torch.h>

#include <iostream>
#include <vector>

namespace {

/// The model's parameter gradients after one backward of its loss on (x, y).
std::vector<torch::Tensor> gradients(torch::nn::Sequential& model, const torch::Tensor& x,
                                     const torch::Tensor& y) {
  model->zero_grad();
  torch::mse_loss(model->forward(x), y).backward();
  std::vector<torch::Tensor> grads;
  for (const auto& parameter : model->parameters())
    grads.push_back(parameter.grad().clone());
  return grads;
}

} // namespace

int main() {
  torch::manual_seed(0);
  torch::nn::Sequential model(torch::nn::Linear(4, 16), torch::nn::Tanh(),
                              torch::nn::Linear(16, 1));

  gradd::enable_guard on;  // gradd serves every backward in this scope
  for (int step = 0; step < 4; ++step) {
    auto x = torch::randn({8, 4});
    auto y = torch::randn({8, 1});
    std::vector<torch::Tensor> stock;
    {
      gradd::disable_guard off;  // the stock engine, for reference
      stock = gradients(model, x, y);
    }
    auto served = gradients(model, x, y);
    for (size_t i = 0; i < served.size(); ++i) {
      if (!torch::equal(served[i], stock[i])) {
        std::cerr << "gradd_consumer: step " << step << ": gradient " << i
                  << " differs from the stock engine's\n";
        return 1;
      }
    }
    gradd::wait_for_compiles();
  }

  const auto stats = gradd::stats();
  std::cout << "gradd_consumer: " << stats << "\n";
  if (stats.plan_backwards == 0) {
    std::cerr << "gradd_consumer: no backward ran on a plan\n";
    return 1;
  }
  std::cout << "gradd_consumer: gradients equal the stock engine's, bitwise\n";
  return 0;
}
