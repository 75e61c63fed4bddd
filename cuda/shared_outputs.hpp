#pragma once

// Leaf gradients that a new CUDA graph writes into the buffers of an older
// graph of its structure in the same pool (Note [Outputs shared across
// shapes], shared_outputs.cpp).

#include <ATen/core/Tensor.h>
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

namespace gradd::cuda {

class shared_outputs {
public:
  /// Nothing shared: a structure's first graph, a graph cut into pieces.
  shared_outputs() = default;

  /// For a graph whose structure has a graph in the same pool that writes
  /// leaf gradient k into `kin[k]` (undefined where none): a scratch buffer,
  /// outside the pool, for each leaf whose buffer can be shared (dense, from
  /// its storage's first byte). Call outside any capture.
  explicit shared_outputs(std::vector<at::Tensor> kin);

  /// During a capture on `stream`, once leaf `leaf`'s gradient is written:
  /// where it agrees with the kin's buffer in layout and nothing else holds
  /// it, copies it into the scratch buffer and hands that on instead, so
  /// its own memory goes back to the pool for what the graph does next.
  void divert(size_t leaf, at::Tensor& gradient, cudaStream_t stream);

  /// After the graph's trials (Note [Bound inputs]): points the copies
  /// into scratch buffers in `graph` and its instance `exec` at the kin's
  /// buffers, and lets the scratch go. A copy the driver will not point
  /// elsewhere keeps its scratch buffer.
  void redirect(cudaGraph_t graph, cudaGraphExec_t exec);

  /// What the graph writes leaf `leaf`'s gradient into now, where that is
  /// not the capture's own output: a scratch buffer before redirect(), a
  /// kin's buffer after. Undefined for a leaf not diverted.
  const at::Tensor& buffer(size_t leaf) const;

  /// For the log: how many leaf gradients it writes into the older graph's
  /// buffers, and why not the others; "" where it was given none.
  std::string summary() const;

  /// Bytes of the scratch buffers the graph still writes after redirect():
  /// memory of its own, outside the pool.
  size_t scratch_bytes() const;

private:
  /// A copy into a scratch buffer, in the graph a capture made.
  struct diverted_copy {
    cudaGraph_t graph;
    cudaGraphNode_t node;
    size_t leaf;
    const void* source;
  };

  /// Notes `why` a leaf keeps a buffer of its own, the first time.
  void keeps_own(const std::string& why);

  std::vector<at::Tensor> kin_;
  std::vector<at::Tensor> scratch_;
  std::vector<bool> diverted_;
  std::vector<bool> redirected_;
  std::vector<diverted_copy> copies_;  ///< one per capture (a graph, its twin) and leaf
  std::string why_not_;  ///< the first reason a leaf kept a buffer of its own
};

} // namespace gradd::cuda
