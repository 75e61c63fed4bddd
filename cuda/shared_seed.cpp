// The seed gradient made once (see graph_path.hpp, Note [A seed made once]).

#include "cuda/graph_path.hpp"

#include <ATen/ops/ones.h>
#include <c10/cuda/CUDAStream.h>

#include <vector>

namespace gradd::cuda {

at::Tensor shared_seed(const at::Tensor& loss) {
  auto stream = c10::cuda::getCurrentCUDAStream(loss.device().index());
  cudaStreamCaptureStatus capturing{};
  if (cudaStreamIsCapturing(stream.stream(), &capturing) != cudaSuccess) {
    // The legacy stream while another thread captures globally: libtorch
    // makes the seed and says what it makes of that.
    (void)cudaGetLastError();
    return {};
  }
  if (capturing != cudaStreamCaptureStatusNone)
    return {};  // making one would put its fill in the caller's graph
  thread_local std::vector<at::Tensor> seeds;
  for (const auto& seed : seeds)
    if (seed.device() == loss.device() && seed.scalar_type() == loss.scalar_type())
      return seed;
  auto seed = at::ones({}, loss.options());
  // Read by later backwards on any stream: filled before it is handed out.
  stream.synchronize();
  seeds.push_back(seed);
  return seed;
}

} // namespace gradd::cuda
