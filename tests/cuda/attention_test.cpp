// Memory-efficient attention saves its dropout seed and offset on the CPU:
// with dropout off its graphs read a device stand-in; with dropout on its
// graphs are cut there, the node called live (Note [Dropout seeds on the
// device], cuda/device_seeds.hpp).

#include "cuda/graph_loop.hpp"

#include <ATen/ops/_scaled_dot_product_efficient_attention.h>

using gradd::test::clear_grads;
using gradd::test::compare_steps;
using gradd::test::grads_of;
using gradd::test::have_cuda;
using torch::Tensor;

namespace {

/// One head group of self-attention through PyTorch's memory-efficient
/// kernel: batch 4, sequence 16, 4 heads of 16.
struct attention {
  attention() {
    torch::manual_seed(7);
    auto on = torch::dtype(torch::kFloat32).device(torch::kCUDA);
    for (auto* w : {&query, &key, &value})
      *w = (torch::randn({64, 64}, on) * 0.1).requires_grad_();
  }
  std::vector<Tensor> parameters() const { return {query, key, value}; }

  Tensor loss(size_t step, double dropout) const {
    torch::manual_seed(100 + step);  // the same dropout masks on both engines
    auto on = torch::dtype(torch::kFloat32).device(torch::kCUDA);
    auto x = torch::sin(torch::arange(4 * 16 * 64, on).reshape({4, 16, 64})
                        * (0.01 * static_cast<double>(step + 1)));
    auto heads = [&](const Tensor& w) { return x.matmul(w).view({4, 16, 4, 16}).transpose(1, 2); };
    auto out = std::get<0>(at::_scaled_dot_product_efficient_attention(
        heads(query), heads(key), heads(value), std::nullopt, /*compute_log_sumexp=*/true,
        dropout));
    return out.square().mean();
  }

  Tensor query, key, value;
};

/// Six steps of `a` with `dropout`, on the stock engine and under graphs,
/// bitwise; gradd's statistics.
gradd::statistics six_steps(attention& a, double dropout,
                            const gradd::settings& policy = gradd::test::graph_settings()) {
  auto params = a.parameters();
  return compare_steps(policy, 6, [&](size_t i) {
    clear_grads(params);
    a.loss(i, dropout).backward();
    return grads_of(params);
  });
}

} // namespace

TEST_CASE("memory-efficient attention without dropout is served by graphs", "[cuda][graphs]") {
  if (!have_cuda())
    return;
  attention a;
  auto s = six_steps(a, 0.0);
  CHECK(s.graph_capture_failures == 0);
  CHECK(s.graph_recordings == 1);
  CHECK(s.graph_backwards == 5);
}

TEST_CASE("memory-efficient attention with dropout: graphs cut there, bitwise", "[cuda][graphs]") {
  if (!have_cuda())
    return;
  attention a;
  auto s = six_steps(a, 0.1);  // each step its own dropout mask
  CHECK(s.graph_capture_failures == 0);
  CHECK(s.graph_recordings == 1);
  CHECK(s.graph_backwards == 5);
  CHECK(s.piecewise_backwards == 5);
  auto all = gradd::graph_stats();
  REQUIRE(all.size() == 1);
  CHECK(all[0].graph_pieces == 2);
  CHECK(all[0].cuts.find("ScaledDotProductEfficientAttentionBackward0") != std::string::npos);
}

TEST_CASE("memory-efficient attention with dropout and cuda_graphs.max_cuts 0 stays on plans",
          "[cuda][graphs]") {
  if (!have_cuda())
    return;
  attention a;
  auto policy = gradd::test::graph_settings();
  policy.cuda_graphs.max_cuts = 0;
  auto s = six_steps(a, 0.1, policy);
  CHECK(s.plan_backwards == 6);
  CHECK(s.graph_backwards == 0);
  auto all = gradd::graph_stats();
  REQUIRE(all.size() == 1);
  CHECK(all[0].plans_only.find("attention with dropout") != std::string::npos);
}
