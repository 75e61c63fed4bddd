// A recording captured into CUDA graphs (see program_capture.hpp).

#include "cuda/program_capture.hpp"

#include "cuda/capture_gate.hpp"
#include "cuda/expandable_segments.hpp"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>

#include <optional>

namespace gradd::cuda {

namespace {

/// One stream capture behind the capture gate (Note [Device synchronizes
/// during captures]) into a private pool of the caching allocator, as
/// at::cuda::CUDAGraph makes it, without the generator registration (see
/// backward_graph::capture), its new segments expandable (Note [Expandable
/// pool segments]). The allocator counts each capture into a pool
/// as one of its users; one that end() ended hands that share to the
/// caller (who gives it back with releasePool once its graph is gone), one
/// that failed gives it back itself. Ends the pool's routing when it goes.
class stream_capture {
public:
  stream_capture(c10::DeviceIndex device, c10::MempoolId_t pool, cudaStream_t stream)
      : device_(device), pool_(pool), stream_(stream) {
    c10::cuda::CUDACachingAllocator::beginAllocateToPool(device, pool, [this](cudaStream_t s) {
      cudaStreamCaptureStatus status;
      c10::CaptureId_t id = 0;
      C10_CUDA_CHECK(cudaStreamGetCaptureInfo(s, &status, &id));
      return status == cudaStreamCaptureStatusActive && id == id_;
    });
    try {
      C10_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      cudaStreamCaptureStatus status;
      C10_CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, &id_));
    } catch (...) {
      stop_allocating();
      throw;
    }
  }

  ~stream_capture() {
    if (capturing_) {
      cudaGraph_t graph = nullptr;
      cudaStreamEndCapture(stream_, &graph);  // invalid already: the first error said why
      if (graph)
        cudaGraphDestroy(graph);
      (void)cudaGetLastError();
      stop_allocating();
    } else {
      c10::cuda::CUDACachingAllocator::endAllocateToPool(device_, pool_);
    }
  }

  stream_capture(const stream_capture&) = delete;
  stream_capture& operator=(const stream_capture&) = delete;

  /// Ends the capture and hands what it captured, and the share of the
  /// pool, to the caller.
  cudaGraph_t end() {
    cudaGraph_t graph = nullptr;
    C10_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    capturing_ = false;
    return graph;
  }

private:
  capture_gate_scope gate_;  // first in, last out: around the whole capture
  expandable_segments_scope segments_;
  c10::DeviceIndex device_;
  c10::MempoolId_t pool_;
  cudaStream_t stream_;
  c10::CaptureId_t id_ = 0;
  bool capturing_ = true;

  /// Ends the routing and gives the pool's share back.
  void stop_allocating() noexcept {
    c10::cuda::CUDACachingAllocator::endAllocateToPool(device_, pool_);
    c10::cuda::CUDACachingAllocator::releasePool(device_, pool_);
  }
};

} // namespace

captured_program capture_program(const functional::recording& recording,
                                 const std::vector<torch::autograd::Node*>& nodes,
                                 const std::vector<at::Tensor>& inputs,
                                 const functional::interpret_options& options,
                                 c10::MempoolId_t pool, c10::cuda::CUDAStream side,
                                 const cut_handler& at_cut) {
  auto device = side.device_index();
  captured_program out;
  try {
    std::optional<stream_capture> capture(std::in_place, device, pool, side.stream());
    auto piece_options = options;
    piece_options.call_node = [&](uint32_t at, torch::autograd::variable_list node_inputs,
                                  const std::vector<at::Tensor>& in_flight) {
      out.graphs.push_back(capture->end());
      capture.reset();
      auto outputs = at_cut(at, node_inputs, in_flight);
      capture.emplace(device, pool, side.stream());
      return outputs;
    };
    out.outputs = functional::interpret(recording, nodes, inputs, piece_options);
    out.graphs.push_back(capture->end());
  } catch (...) {
    for (auto graph : out.graphs) {
      cudaGraphDestroy(graph);
      c10::cuda::CUDACachingAllocator::releasePool(device, pool);
    }
    throw;
  }
  return out;
}

} // namespace gradd::cuda
