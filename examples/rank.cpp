// One training rank, as `gradd launch` runs it (make demo), and as the
// daemon tests do: it compiles with the daemon that $GRADD_DAEMON and
// $GRADD_TOKEN_FILE name, when they do.
//
//   gradd_rank POLICY BACKWARDS
//
// Under the policy file POLICY, runs BACKWARDS backwards of each of three
// structures (chains of 1, 2 and 3 tanh layers), each one's gradients
// compared with the stock engine's for the same step, bitwise. Prints who
// served each backward, per structure the first backward a plan served,
// and the statistics:
//
//   rank 0 structure 0 backward 0: plan, gradients equal the stock engine's
//   ...
//   structure=0 first_plan=0 plans=4
//   ...
//   backwards=12 plan_backwards=12 ... daemon_plans=3 daemon_fallbacks=0
//
// Exit status: 0 when every gradient equalled the stock engine's, 1 if one
// did not, 2 for bad arguments.

#include "engine/gradd.hpp"

#include <torch/torch.h>

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
  bool equal = true;
  for (int layers = 1; layers <= 3; ++layers) {
    chain model(layers);
    int first_plan = -1;
    int plans = 0;
    for (int step = 0; step < backwards; ++step) {
      std::vector<torch::Tensor> stock;
      {
        gradd::disable_guard off;
        stock = model.backward(step);
      }
      auto before = gradd::stats().plan_backwards;
      auto ours = model.backward(step);
      bool by_plan = gradd::stats().plan_backwards > before;
      if (by_plan) {
        plans += 1;
        if (first_plan < 0)
          first_plan = step;
      }
      bool same = bitwise_equal(stock, ours);
      equal = equal && same;
      std::cout << "rank " << (rank ? rank : "-") << " structure " << layers - 1 << " backward "
                << step << ": " << (by_plan ? "plan" : "stock engine") << ", gradients "
                << (same ? "equal" : "DIFFER FROM") << " the stock engine's" << std::endl;
    }
    std::cout << "structure=" << layers - 1 << " first_plan=" << first_plan << " plans=" << plans
              << std::endl;
  }
  std::cout << gradd::stats() << std::endl;
  gradd::disable();
  return equal ? 0 : 1;
}
