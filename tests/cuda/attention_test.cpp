// Memory-efficient attention saves its dropout seed and offset on the CPU;
// its graphs read device copies of them, fresh at every replay (Note
// [Dropout seeds on the device], cuda/device_seeds.hpp).

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

} // namespace

TEST_CASE("memory-efficient attention is served by graphs, with and without dropout",
          "[cuda][graphs]") {
  if (!have_cuda())
    return;
  for (double dropout : {0.0, 0.1}) {
    DYNAMIC_SECTION("dropout " << dropout) {
      attention a;
      auto params = a.parameters();
      auto s = compare_steps(gradd::test::graph_settings(), 6, [&](size_t i) {
        clear_grads(params);
        a.loss(i, dropout).backward();
        return grads_of(params);
      });
      CHECK(s.graph_capture_failures == 0);
      CHECK(s.graph_recordings == 1);
      CHECK(s.graph_backwards == 5);  // each with its own step's dropout seed
    }
  }
}
