// gradd's demo: a training loop with gradd serving every backward, beside
// the same loop on the stock engine. The two loss curves must agree exactly.
//
// Two identical MLPs (same seed) train on the same synthetic batches with
// Adam. Each step runs the stock engine's loop, then gradd's; the
// program prints both losses and exits non-zero if they ever differ.

#include "examples/models.hpp"
#include "gradd/gradd.hpp"

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

/// The number of steps in `text`; exits with a message if it is not one.
int steps_of(const std::string& text) {
  try {
    size_t used = 0;
    int n = std::stoi(text, &used);
    if (used == text.size() && n >= 1)
      return n;
  } catch (const std::exception&) {
  }
  std::cerr << "gradd_train: steps must be an integer >= 1, got '" << text << "'\n"
            << "usage: gradd_train [model] [steps]\n";
  std::exit(2);
}

int train(const std::string& model_name, int steps) {
  auto policy = gradd::default_settings();  // $GRADD_CONFIG, or the defaults
  trainer stock(model_name);
  trainer served(model_name);

  std::printf("gradd demo: %s, %d steps of Adam, stock engine vs gradd\n", model_name.c_str(),
              steps);
  std::printf("%6s %14s %14s\n", "step", "stock loss", "gradd loss");
  bool agree = true;
  // gradd serves the whole run; the stock engine's steps step out of it.
  gradd::enable_guard on{policy};
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
                static_cast<unsigned long long>(g.id), to_string(g.state), g.nodes,
                static_cast<unsigned long long>(g.hits),
                static_cast<unsigned long long>(g.pending_backwards), g.compile_ms);
  if (!agree) {
    std::cout << "FAILED: the loss curves differ\n";
    return 1;
  }
  std::cout << "the loss curves agree bitwise\n";
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  if (argc > 3) {
    std::cerr << "usage: gradd_train [model] [steps]\n";
    return 2;
  }
  // A bad policy ($GRADD_CONFIG) or model name ends with its message, not
  // in terminate().
  try {
    return train(argc > 1 ? argv[1] : "mlp", argc > 2 ? steps_of(argv[2]) : 60);
  } catch (const gradd::config_error& e) {
    std::cerr << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "gradd_train: " << e.what() << "\n";
    return 1;
  }
}
