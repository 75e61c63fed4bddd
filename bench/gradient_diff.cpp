// gradd's gradients against the stock engine's (see gradient_diff.hpp).

#include "bench/gradient_diff.hpp"

#include "bench/timed_backward.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace gradd::bench {

namespace {

/// Copies of the parameters' gradients (undefined where there is none).
std::vector<torch::Tensor> grads(models::model& model) {
  std::vector<torch::Tensor> out;
  for (const auto& p : model.parameters())
    out.push_back(p.grad().defined() ? p.grad().detach().clone() : torch::Tensor());
  return out;
}

/// The largest difference between two sets of gradients, relative to each
/// stock gradient's largest magnitude; infinite if one is missing.
double max_rel_diff(const std::vector<torch::Tensor>& stock,
                    const std::vector<torch::Tensor>& mine) {
  double worst = 0;
  for (size_t i = 0; i < stock.size(); ++i) {
    if (stock[i].defined() != mine[i].defined())
      return INFINITY;
    if (!stock[i].defined())
      continue;
    double scale = std::max(stock[i].abs().max().item<double>(), 1e-30);
    worst = std::max(worst, (mine[i] - stock[i]).abs().max().item<double>() / scale);
  }
  return worst;
}

} // namespace

std::pair<double, double> max_rel_grad_diffs(models::model& model, int64_t step,
                                             const torch::Device& device) {
  timed_backward(model, step, false, device);
  auto stock = grads(model);
  timed_backward(model, step, false, device);
  auto stock_again = grads(model);
  timed_backward(model, step, true, device);
  return {max_rel_diff(stock, grads(model)), max_rel_diff(stock, stock_again)};
}

} // namespace gradd::bench
