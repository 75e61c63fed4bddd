// Capture of the stock engine's backward into one CUDA graph, as PyTorch's
// whole-network capture does it: warm-up backwards on a side stream (cuBLAS
// workspaces and the allocator settle there), the forward outside the
// capture, `backward()` inside it, then timed replays: of one graph in a
// row, or of a sweep's graphs in turn.

#include "bench/backward_floor.hpp"

#include "bench/timing.hpp"

#ifdef GRADD_CUDA_HEADERS
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <torch/torch.h>

#include <chrono>
#include <memory>
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

#ifdef GRADD_CUDA_HEADERS
namespace {

/// The stock engine's backward of `model`'s loss at `step`, captured on the
/// current stream after warm-up backwards there, and replayed once (the
/// first replay uploads the graph). The loss holds what the graph reads:
/// the capture keeps its graph, so the saved tensors stay allocated while
/// other captures' forwards run (released, their memory went to the next
/// forward, and a replay in turn read another step's tensors: convnet's
/// loss backward tripped its device assert on stale targets).
struct captured_backward {
  torch::Tensor loss;
  std::unique_ptr<at::cuda::CUDAGraph> graph = std::make_unique<at::cuda::CUDAGraph>();
};

captured_backward capture_backward(models::model& model, int64_t step) {
  for (int i = 0; i < 3; ++i) {
    clear_grads(model);
    model.loss(step).backward();
  }
  clear_grads(model);
  captured_backward captured{model.loss(step)};
  torch::cuda::synchronize();
  captured.graph->capture_begin();
  captured.loss.backward({}, /*retain_graph=*/true);
  captured.graph->capture_end();
  torch::cuda::synchronize();
  captured.graph->replay();
  torch::cuda::synchronize();
  return captured;
}

} // namespace
#endif

std::optional<backward_floor> measure_backward_floor(models::model& model, int64_t step,
                                                    int runs) {
#ifdef GRADD_CUDA_HEADERS
  c10::cuda::CUDAStreamGuard on_side(c10::cuda::getStreamFromPool());
  std::vector<double> times, launches;
  {
    auto captured = capture_backward(model, step);
    for (int r = 0; r < runs; ++r) {
      auto start = std::chrono::steady_clock::now();
      captured.graph->replay();
      launches.push_back(milliseconds_since(start) * 1e3);
      torch::cuda::synchronize();
      times.push_back(milliseconds_since(start));
    }
    clear_grads(model);  // its tensors live in the graph's pool, freed with it
  }
  return backward_floor{median(times), median(launches)};
#else
  (void)model, (void)step, (void)runs;
  return std::nullopt;
#endif
}

std::vector<double> measure_rotating_floor(models::model& model, int64_t first, int shapes,
                                           int runs) {
#ifdef GRADD_CUDA_HEADERS
  c10::cuda::CUDAStreamGuard on_side(c10::cuda::getStreamFromPool());
  std::vector<std::vector<double>> times(shapes);
  {
    std::vector<captured_backward> captured;
    for (int s = 0; s < shapes; ++s)
      captured.push_back(capture_backward(model, first + s));
    for (int r = 0; r < runs; ++r)
      for (int s = 0; s < shapes; ++s) {
        auto start = std::chrono::steady_clock::now();
        captured[s].graph->replay();
        torch::cuda::synchronize();
        times[s].push_back(milliseconds_since(start));
      }
    clear_grads(model);
  }
  std::vector<double> medians;
  for (const auto& t : times)
    medians.push_back(median(t));
  return medians;
#else
  (void)model, (void)first, (void)shapes, (void)runs;
  return {};
#endif
}

} // namespace gradd::measure
