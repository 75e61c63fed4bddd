// Graphs and the stream actor's work share the training stream's cuBLAS
// workspace (Note [One cuBLAS workspace per training stream],
// cuda/blas_workspace.cpp).

#include "cuda/graph_loop.hpp"

#include <ATen/cuda/CUDAContextLight.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <set>

using gradd::test::have_cuda;
using gradd::test::mlp;
using gradd::test::policy;
using gradd::test::require_bitwise_equal;

namespace {

/// The distinct addresses PyTorch's cuBLAS and cuBLASLt workspaces have.
std::set<const void*> workspace_addresses() {
  std::set<const void*> addresses;
  for (auto* map : {&at::cuda::cublas_handle_stream_to_workspace(),
                    &at::cuda::cublaslt_handle_stream_to_workspace()}) {
    std::shared_lock lock(map->mutex);
    for (const auto& [key, memory] : map->map)
      addresses.insert(memory.get());
  }
  return addresses;
}

/// The mlp's gradients after one backward of `batch` rows.
std::vector<torch::Tensor> step(const mlp& m, int64_t batch, int64_t i) {
  auto params = m.parameters();
  gradd::test::clear_grads(params);
  m.loss(batch, i).backward();
  return gradd::test::grads_of(params);
}

/// The mlp's gradients on the stock engine, steps 0 to 3 of 64 rows.
std::vector<std::vector<torch::Tensor>> stock_steps(const mlp& m) {
  gradd::disable_guard off;
  std::vector<std::vector<torch::Tensor>> stock;
  for (int64_t i = 0; i < 4; ++i)
    stock.push_back(step(m, 64, i));
  torch::cuda::synchronize();
  return stock;
}

/// Steps 0 to 3 under graphs, bitwise those of the stock engine: the first
/// recorded, the rest replaying its graph.
void graph_steps(const mlp& m, const std::vector<std::vector<torch::Tensor>>& stock) {
  for (int64_t i = 0; i < 4; ++i) {
    INFO("step " << i);
    require_bitwise_equal(stock[i], step(m, 64, i));
    REQUIRE(gradd::wait_for_compiles());
  }
}

} // namespace

TEST_CASE("CUDA graphs add no cuBLAS workspace to the training stream's", "[cuda][graphs]") {
  if (!have_cuda())
    return;
  mlp m;  // addmm: cuBLAS, with its workspace
  auto stock = stock_steps(m);
  auto before = workspace_addresses();
  REQUIRE_FALSE(before.empty());
  gradd::reset();
  gradd::enable_guard on{policy(gradd::graph_shape_policy::static_shapes)};
  graph_steps(m, stock);
  REQUIRE(gradd::stats().graph_backwards == 3);
  // The stream actor's handle, on the training stream and on its capture
  // stream, points at the workspace the training stream had.
  CHECK(workspace_addresses() == before);

  SECTION("a graph that reads it replays on that stream only") {
    c10::impl::VirtualGuardImpl cuda(c10::DeviceType::CUDA);
    auto other = cuda.getStreamFromGlobalPool(c10::Device(c10::kCUDA, 0));
    std::vector<torch::Tensor> ours;
    {
      c10::StreamGuard on_other(other);
      ours = step(m, 64, 1);
    }
    require_bitwise_equal(stock[1], ours);
    CHECK(gradd::stats().graph_backwards == 3);  // its plan served it
    CHECK(gradd::stats().graph_other_stream == 1);
  }
}

TEST_CASE("clearing PyTorch's cuBLAS workspaces frees none a CUDA graph reads", "[cuda][graphs]") {
  if (!have_cuda())
    return;
  mlp m;
  auto stock = stock_steps(m);
  gradd::reset();
  gradd::enable_guard on{policy(gradd::graph_shape_policy::static_shapes)};
  graph_steps(m, stock);
  REQUIRE(gradd::stats().graph_backwards == 3);
  at::cuda::clearCublasWorkspaces();  // a common way to give memory back
  for (int64_t i = 0; i < 4; ++i) {
    INFO("step " << i << " after the clear");
    require_bitwise_equal(stock[i], step(m, 64, i));
  }
  CHECK(gradd::stats().graph_backwards == 7);
}
