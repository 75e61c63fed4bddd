// Graphs and the stream actor's work share the training stream's cuBLAS
// workspace (Note [One cuBLAS workspace per training stream],
// cuda/blas_workspace.cpp).

#include "cuda/blas_workspace.hpp"
#include "cuda/graph_loop.hpp"

#include <ATen/cuda/CUDAContextLight.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <set>
#include <thread>

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

// Hidden: a diagnostic for the rare hang in docs/design.md, Known gaps, not
// yet run on a GPU. Its question: can two threads' cuBLAS calls on one
// stream share one workspace, as the stream actor's eager work and the
// training thread's calls do? A call that splits its inner dimension writes
// partial sums into the workspace and reduces them in a second launch;
// another thread's launches landing between the two on the stream would
// overwrite them. If the answer is no, it fails, or hangs; there:
//   scripts/gpu_hang_watch.sh 20 60 scripts/gpu_prebuilt.sh run \
//     .deps/bin/gradd_tests "[workspace-race]"
TEST_CASE("two threads' cuBLAS calls on one stream through one shared workspace each get their "
          "own products",
          "[.][workspace-race]") {
  if (!have_cuda())
    return;
  constexpr int calls = 400;
  auto cuda = torch::TensorOptions().device(torch::kCUDA);
  auto stream = c10::cuda::getStreamFromPool(false, 0);
  auto capture = c10::cuda::getStreamFromPool(false, 0);
  // Small products of a long inner dimension: where cuBLAS splits it.
  auto a = torch::randn({64, 1 << 16}, cuda), b = torch::randn({1 << 16, 64}, cuda);
  auto c = torch::randn({96, 1 << 15}, cuda), d = torch::randn({1 << 15, 96}, cuda);
  torch::Tensor ab, cd;
  {
    c10::cuda::CUDAStreamGuard on_stream(stream);  // the training thread's workspace for `stream`
    ab = a.mm(b);
    cd = c.mm(d);
    stream.synchronize();
  }
  // Each thread queues its calls back to back, then compares them all.
  auto products = [&](const torch::Tensor& x, const torch::Tensor& y) {
    c10::cuda::CUDAStreamGuard on_stream(stream);
    std::vector<torch::Tensor> found;
    for (int i = 0; i < calls; ++i)
      found.push_back(x.mm(y));
    stream.synchronize();
    return found;
  };
  std::vector<torch::Tensor> actor_products;
  std::thread actor([&] {
    c10::cuda::CUDAGuard device(0);
    gradd::cuda::shared_workspace_scope shared(stream, capture);  // as a capture's scope
    actor_products = products(c, d);
  });
  auto training_products = products(a, b);
  actor.join();
  auto differing = [](const std::vector<torch::Tensor>& found, const torch::Tensor& alone) {
    return std::count_if(found.begin(), found.end(),
                         [&](const torch::Tensor& p) { return !torch::equal(p, alone); });
  };
  CHECK(differing(training_products, ab) == 0);
  CHECK(differing(actor_products, cd) == 0);
}
