#pragma once

// The cuBLAS workspaces of a stream actor's capture, and those its graphs
// read afterwards (Note [One cuBLAS workspace per training stream],
// blas_workspace.cpp).

#include "cuda/graph_pointers.hpp"

#include <c10/core/Allocator.h>
#include <c10/cuda/CUDAStream.h>

#include <memory>
#include <vector>

namespace gradd::cuda {

/// For its scope, the calling thread's cuBLAS and cuBLASLt calls on
/// `training` and on `capture` use workspaces of the scope's own.
/// hand_over() then says where a graph captured in the scope is to read
/// instead: the workspaces of `training`'s own calls, which gradd keeps from
/// then on. Call on the thread that makes those calls, with `training`'s
/// device current.
class capture_workspaces {
public:
  capture_workspaces(c10::cuda::CUDAStream training, c10::cuda::CUDAStream capture);
  /// Puts back what the thread's calls on `capture` used before, and gives
  /// the scope's workspaces back to the device, in order on `training`.
  ~capture_workspaces();
  capture_workspaces(const capture_workspaces&) = delete;
  capture_workspaces& operator=(const capture_workspaces&) = delete;

  /// The scope's own workspaces.
  std::vector<device_range> own() const;

  /// Once, after the last launch in the scope of a graph captured in it:
  /// the moves from the scope's workspaces in `read` (those the graph
  /// reads) to `training`'s. Where `training` has none yet, the scope's
  /// becomes it, kept, and is not moved.
  std::vector<pointer_move> hand_over(const std::vector<device_range>& read);

  /// Once, after the last launch in the scope, instead of hand_over(),
  /// where a graph's pointers cannot be moved (a driver without
  /// cuFuncGetParamInfo): the scope's workspaces, for that graph to hold
  /// and read on `training` only. No call uses them after the scope; they
  /// go back to the device in order on `training` when dropped.
  std::vector<at::DataPtr> give_up();

private:
  /// The destructor's work.
  void put_back();

  struct workspace;  // one per map: the scope's own, and the entries it replaced
  std::vector<std::unique_ptr<workspace>> workspaces_;
};

} // namespace gradd::cuda
