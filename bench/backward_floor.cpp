// Capture of the stock engine's backward into one CUDA graph, as PyTorch's
// whole-network capture does it: warm-up backwards on a side stream (cuBLAS
// workspaces and the allocator settle there), the forward outside the
// capture, `backward()` inside it, then timed replays.

#include "bench/backward_floor.hpp"

#ifdef GRADD_CUDA_HEADERS
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace gradd::measure {

namespace {

void clear_grads(models::model& model) {
  for (auto p : model.parameters())
    p.mutable_grad() = torch::Tensor();
}

} // namespace

bool backward_floor_available() noexcept {
#ifdef GRADD_CUDA_HEADERS
  return true;
#else
  return false;
#endif
}

std::optional<backward_floor> measure_backward_floor(models::model& model, int64_t step,
                                                    int runs) {
#ifdef GRADD_CUDA_HEADERS
  auto side = c10::cuda::getStreamFromPool();
  std::vector<double> times, launches;
  {
    c10::cuda::CUDAStreamGuard on_side(side);
    for (int i = 0; i < 3; ++i) {
      clear_grads(model);
      model.loss(step).backward();
    }
    clear_grads(model);
    auto loss = model.loss(step);
    torch::cuda::synchronize();
    at::cuda::CUDAGraph graph;
    graph.capture_begin();
    loss.backward();
    graph.capture_end();
    torch::cuda::synchronize();
    graph.replay();  // the first replay uploads the graph
    torch::cuda::synchronize();
    for (int r = 0; r < runs; ++r) {
      auto start = std::chrono::steady_clock::now();
      graph.replay();
      launches.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count());
      torch::cuda::synchronize();
      times.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
    }
    clear_grads(model);  // its tensors live in the graph's pool, freed with it
  }
  auto median = [](std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return backward_floor{median(times), median(launches)};
#else
  (void)model, (void)step, (void)runs;
  return std::nullopt;
#endif
}

} // namespace gradd::measure
