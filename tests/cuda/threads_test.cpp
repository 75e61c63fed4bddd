// Four threads train their own models on one device while gradd captures
// each one's graphs on its stream actor: no thread's own op fails because
// of a capture, and every gradient is the stock engine's.

#include "cuda/graph_loop.hpp"

#include <array>
#include <string>
#include <thread>

using gradd::test::bitwise_equal;
using gradd::test::clear_grads;
using gradd::test::grads_of;
using gradd::test::have_cuda;
using gradd::test::mlp;
using gradd::test::policy;

TEST_CASE("four threads train on one device while their graphs are captured",
          "[cuda][graphs]") {
  if (!have_cuda())
    return;
  constexpr int threads = 4;
  constexpr int steps = 12;
  const std::vector<int64_t> batches{8, 16, 32, 16};
  std::array<mlp, threads> models;
  auto run = [&](int t, std::vector<std::vector<torch::Tensor>>& out) {
    auto params = models[t].parameters();
    for (int step = 0; step < steps; ++step) {
      clear_grads(params);
      // A structure of its own per thread: threads sharing one would take
      // turns replacing its graphs' parameters.
      auto h = models[t].hidden(batches[(step + t) % batches.size()], step, 1 + t % 3);
      (t == 3 ? h * 2 : h).square().mean().backward();
      torch::cuda::synchronize();
      out.push_back(grads_of(params));
    }
  };
  std::array<std::vector<std::vector<torch::Tensor>>, threads> stock, ours;
  {
    gradd::disable_guard off;
    for (int t = 0; t < threads; ++t)
      run(t, stock[t]);
  }
  gradd::reset();
  std::array<std::string, threads> errors;
  {
    gradd::enable_guard on{policy(gradd::graph_shape_policy::static_shapes)};
    std::vector<std::thread> running;
    for (int t = 0; t < threads; ++t)
      running.emplace_back([&, t] {
        try {
          run(t, ours[t]);
        } catch (const std::exception& e) {
          errors[t] = e.what();
        }
      });
    for (auto& thread : running)
      thread.join();
    REQUIRE(gradd::wait_for_compiles());
  }
  for (int t = 0; t < threads; ++t) {
    INFO("thread " << t << ": " << errors[t]);
    CHECK(errors[t].empty());
    REQUIRE(ours[t].size() == stock[t].size());
    for (size_t step = 0; step < stock[t].size(); ++step) {
      INFO("step " << step);
      CHECK(bitwise_equal(stock[t][step], ours[t][step]));
    }
  }
  auto s = gradd::stats();
  CHECK(s.graph_capture_failures == 0);
  CHECK(s.graph_backwards > 0);
}
