// One training rank, as `gradd launch` runs it (make demo), and as the
// daemon tests do: it compiles with the daemon that $GRADD_DAEMON and
// $GRADD_TOKEN_FILE name, when they do.
//
//   gradd_rank POLICY BACKWARDS
//
// Under the policy file POLICY, runs BACKWARDS steps of one backward of each
// of three structures (chains of 1, 2 and 3 tanh layers), each one's
// gradients compared with the stock engine's for the same step, bitwise.
// Prints who served each backward, per structure the first step a plan
// served, the longest backward (gradd's, the stock engine's) and the
// statistics:
//
//   rank 0 structure 0 backward 0: plan, gradients equal the stock engine's
//   ...
//   structure=0 first_plan=0 plans=4
//   ...
//   longest_ms=2.1 longest_at=0 longest_stock_ms=1.9
//   backwards=12 plan_backwards=12 ... daemon_plans=3 daemon_fallbacks=0
//
// Exit status: 0 when every gradient equalled the stock engine's, 1 if one
// did not, 2 for bad arguments.

#include "gradd/gradd.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

namespace {

struct chain {
  std::vector<torch::Tensor> weights;

  explicit chain(int layers) {
    torch::manual_seed(layers);
    for (int i = 0; i < layers; ++i)
      weights.push_back(torch::randn({8, 8}, torch::dtype(torch::kFloat64)).requires_grad_());
  }

  /// One backward of step `step`; its gradients.
  std::vector<torch::Tensor> backward(int step) {
    for (auto& w : weights)
      w.mutable_grad() = torch::Tensor();
    auto y = torch::full({4, 8}, 0.1 * (step + 1), torch::dtype(torch::kFloat64));
    for (auto& w : weights)
      y = torch::tanh(y.matmul(w));
    y.square().sum().backward();
    std::vector<torch::Tensor> grads;
    for (auto& w : weights)
      grads.push_back(w.grad().clone());
    return grads;
  }
};

bool bitwise_equal(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!torch::equal(a[i].view(torch::kInt64), b[i].view(torch::kInt64)))
      return false;
  return true;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: gradd_rank POLICY BACKWARDS\n";
    return 2;
  }
  int backwards = std::atoi(argv[2]);
  const char* rank = std::getenv("RANK");
  gradd::enable(std::string(argv[1]));
  std::vector<chain> models;
  for (int layers = 1; layers <= 3; ++layers)
    models.emplace_back(layers);
  std::vector<int> first_plan(models.size(), -1), plans(models.size(), 0);
  std::chrono::duration<double, std::milli> longest{0}, longest_stock{0};
  int longest_at = -1;  // the step of the longest backward under gradd
  bool equal = true;
  // Step by step, one backward of each structure, as a training loop of
  // three models would.
  for (int step = 0; step < backwards; ++step) {
    for (size_t m = 0; m < models.size(); ++m) {
      std::vector<torch::Tensor> stock;
      auto start = std::chrono::steady_clock::now();
      {
        gradd::disable_guard off;
        stock = models[m].backward(step);
      }
      auto middle = std::chrono::steady_clock::now();
      auto before = gradd::stats().plan_backwards;
      auto ours = models[m].backward(step);
      using ms = std::chrono::duration<double, std::milli>;
      longest_stock = std::max(longest_stock, ms(middle - start));
      if (auto took = ms(std::chrono::steady_clock::now() - middle); took > longest) {
        longest = took;
        longest_at = step;
      }
      bool by_plan = gradd::stats().plan_backwards > before;
      if (by_plan) {
        plans[m] += 1;
        if (first_plan[m] < 0)
          first_plan[m] = step;
      }
      bool same = bitwise_equal(stock, ours);
      equal = equal && same;
      std::cout << "rank " << (rank ? rank : "-") << " structure " << m << " backward " << step
                << ": " << (by_plan ? "plan" : "stock engine") << ", gradients "
                << (same ? "equal" : "DIFFER FROM") << " the stock engine's\n";
    }
  }
  for (size_t m = 0; m < models.size(); ++m)
    std::cout << "structure=" << m << " first_plan=" << first_plan[m] << " plans=" << plans[m]
              << "\n";
  std::cout << "longest_ms=" << longest.count() << " longest_at=" << longest_at
            << " longest_stock_ms=" << longest_stock.count() << "\n";
  std::cout << gradd::stats() << std::endl;
  gradd::disable();
  return equal ? 0 : 1;
}
