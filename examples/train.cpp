// gradd's demo: a training loop with gradd serving every backward, beside
// the same loop on the stock engine. The two loss curves must agree exactly.
//
// Two identical MLPs (same seed) train on the same synthetic batches with
// Adam. Each step runs the stock engine's loop, then gradd's; the
// program prints both losses and exits non-zero if they ever differ.

#include "engine/gradd.hpp"
#include "examples/models.hpp"

#include <torch/torch.h>

#include <cstdio>
#include <iostream>

namespace {

struct trainer {
  explicit trainer(const std::string& model_name)
      : model(gradd::models::make_model(model_name, torch::kCPU)),
        optimizer(model->parameters(), torch::optim::AdamOptions(1e-3)) {}

  float step(int64_t i) {
    optimizer.zero_grad();
    auto loss = model->loss(i % 8);  // eight batches, seen over and over
    loss.backward();
    optimizer.step();
    return loss.item<float>();
  }

  std::unique_ptr<gradd::models::model> model;
  torch::optim::Adam optimizer;
};

} // namespace

int main(int argc, char** argv) {
  const std::string model_name = argc > 1 ? argv[1] : "mlp";
  const int steps = argc > 2 ? std::atoi(argv[2]) : 60;
  trainer stock(model_name);
  trainer served(model_name);

  std::printf("gradd demo: %s, %d steps of Adam, stock engine vs gradd\n", model_name.c_str(),
              steps);
  std::printf("%6s %14s %14s\n", "step", "stock loss", "gradd loss");
  bool agree = true;
  // gradd serves the whole run (policy from $GRADD_CONFIG or the defaults);
  // the stock engine's steps step out of it.
  gradd::enable_guard on;
  for (int i = 0; i < steps; ++i) {
    float stock_loss;
    {
      gradd::disable_guard off;
      stock_loss = stock.step(i);
    }
    float gradd_loss = served.step(i);
    agree = agree && stock_loss == gradd_loss;
    if (i % 5 == 0 || i + 1 == steps)
      std::printf("%6d %14.8f %14.8f%s\n", i, stock_loss, gradd_loss,
                  stock_loss == gradd_loss ? "" : "  <- differs");
  }
  std::cout << "gradd statistics: " << gradd::stats() << '\n';
  for (const auto& g : gradd::graph_stats())
    std::printf("  graph %llu: %s, %u nodes, %llu hits, %llu backwards while compiling, "
                "compiled in %.2f ms\n",
                static_cast<unsigned long long>(g.id), g.state.c_str(), g.nodes,
                static_cast<unsigned long long>(g.hits),
                static_cast<unsigned long long>(g.pending_backwards), g.compile_ms);
  if (!agree) {
    std::cout << "FAILED: the loss curves differ\n";
    return 1;
  }
  std::cout << "the loss curves agree bitwise\n";
  return 0;
}
