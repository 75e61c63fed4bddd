#pragma once

// The cuBLAS workspaces a stream actor shares with the training stream it
// captures for (Note [One cuBLAS workspace per training stream],
// blas_workspace.cpp).

#include "cuda/bound_inputs.hpp"

#include <c10/cuda/CUDAStream.h>

#include <memory>
#include <vector>

namespace gradd::cuda {

/// For its scope, the calling thread's cuBLAS and cuBLASLt calls on
/// `training` and on `capture` use the workspaces of `training`'s own
/// calls, which gradd keeps from then on. Call on the thread that makes
/// those calls, with `training`'s device current.
class shared_workspace_scope {
public:
  shared_workspace_scope(c10::cuda::CUDAStream training, c10::cuda::CUDAStream capture);
  /// Puts back what the thread's calls on `capture` used before.
  ~shared_workspace_scope();
  shared_workspace_scope(const shared_workspace_scope&) = delete;
  shared_workspace_scope& operator=(const shared_workspace_scope&) = delete;

  /// The workspaces shared: a graph captured in the scope that reads one
  /// may run on `training` only.
  const std::vector<device_range>& shared() const noexcept { return shared_; }

private:
  struct replaced;  // a map entry the scope replaced, to put back
  std::vector<std::unique_ptr<replaced>> replaced_;
  std::vector<device_range> shared_;
};

} // namespace gradd::cuda
