// A backward inside the user's own CUDA graph capture (a whole training step
// captured by hand): it runs on its plan, which the user's graph holds;
// gradd's graphs neither launch into it nor are captured from it
// (cuda::stream_capturing).

#include "cuda/graph_loop.hpp"

#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>

using gradd::test::have_cuda;
using gradd::test::mlp;
using gradd::test::policy;
using gradd::test::require_bitwise_equal;

TEST_CASE("a backward inside the user's own CUDA graph capture runs on its plan",
          "[cuda][graphs]") {
  if (!have_cuda())
    return;
  mlp m;
  auto params = m.parameters();
  auto step = [&](int64_t i) {
    gradd::test::clear_grads(params);
    m.loss(64, i).backward();
    return gradd::test::grads_of(params);
  };
  std::vector<torch::Tensor> stock;
  {
    gradd::disable_guard off;
    stock = step(9);
  }
  gradd::reset();
  gradd::enable_guard on{policy(gradd::graph_shape_policy::static_shapes)};
  for (int64_t i = 0; i < 3; ++i) {
    step(i);
    REQUIRE(gradd::wait_for_compiles());
  }
  REQUIRE(gradd::stats().graph_backwards == 2);

  auto side = c10::cuda::getStreamFromPool();
  at::cuda::CUDAEvent made;
  made.record(c10::cuda::getCurrentCUDAStream());
  made.block(side);
  c10::cuda::CUDAStreamGuard on_side(side);
  step(9);  // the user's warm-up on the capture stream
  auto before = gradd::stats();
  at::cuda::CUDAGraph user_graph;
  gradd::test::clear_grads(params);  // .grad made in the capture, as PyTorch's docs do
  user_graph.capture_begin();
  m.loss(64, 9).backward();
  user_graph.capture_end();
  REQUIRE(gradd::wait_for_compiles());
  auto after = gradd::stats();
  CHECK(after.plan_backwards == before.plan_backwards + 1);
  CHECK(after.graph_backwards == before.graph_backwards);
  CHECK(after.graph_other_stream == before.graph_other_stream);  // not even weighed
  CHECK(after.graph_recordings == before.graph_recordings);
  user_graph.replay();
  side.synchronize();
  require_bitwise_equal(stock, gradd::test::grads_of(params));
}
