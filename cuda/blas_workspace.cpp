// The cuBLAS workspaces a stream actor shares (see blas_workspace.hpp).
//
// Note [One cuBLAS workspace per training stream]
// PyTorch gives every (cuBLAS handle, stream) a workspace of its own, 32 MiB
// on Hopper, and cuBLASLt a second map of them (CublasHandlePool.cpp);
// handles are per thread. A stream actor used to record, warm up and
// replay binding trials on a side stream with its own handle, and its
// graphs read that side workspace: one more 32 MiB for as long as they
// lived, a third of a small model's training step. Now the actor does its
// eager work on the training stream itself, and its handle's entries for
// the training stream and for its capture stream point at the workspace of
// the training stream's own calls. Work on one stream runs in order, so no
// two kernels write the workspace at once; a graph that reads it replays
// on that stream only (backward_graph::launches_on). gradd takes the shared
// workspace into its keeping and leaves the map an entry that owns nothing,
// so that clearCublasWorkspaces() (a common way to free memory) cannot free
// it under a graph; the training stream's calls then make a new one. Where
// the training stream has none yet (no cuBLAS call there), the actor's
// first call makes it. The maps and their mutexes are PyTorch's exported
// ones (ATen/cuda/CUDAContextLight.h).

#include "cuda/blas_workspace.hpp"

#include <ATen/cuda/CUDAContextLight.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>

#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <utility>

namespace gradd::cuda {

namespace {

using workspace_key = std::tuple<void*, void*>;  // (handle, stream), as PyTorch's maps key them

/// The workspaces gradd keeps, by map, device and stream (a device's
/// default stream is null on every device); never freed (CUDA may be gone
/// at static destruction), as PyTorch's maps are not.
struct kept_workspaces {
  std::mutex mutex;
  std::map<std::tuple<const void*, c10::DeviceIndex, void*>, at::DataPtr> by_stream;

  static kept_workspaces& instance() {
    static auto* kept = new kept_workspaces();
    return *kept;
  }
};

/// An entry pointing at `memory` that owns nothing.
at::DataPtr alias_of(const at::DataPtr& memory) {
  return at::DataPtr(memory.get(), memory.device());
}

/// The workspace gradd keeps for `stream` of `device` in `map`, taken on
/// first use from the map's entry for that stream (another handle's before
/// `handle`'s: the training thread's), which then owns nothing; null where
/// the map has none. Call with the map's mutex held.
const at::DataPtr* kept_workspace(at::cuda::WorkspaceMapWithMutex& map, c10::DeviceIndex device,
                                  void* stream, void* handle) {
  auto& kept = kept_workspaces::instance();
  std::lock_guard lock(kept.mutex);
  auto key = std::make_tuple(static_cast<const void*>(&map), device, stream);
  if (auto it = kept.by_stream.find(key); it != kept.by_stream.end())
    return &it->second;
  auto found = map.map.end();
  for (auto it = map.map.begin(); it != map.map.end(); ++it)
    if (std::get<1>(it->first) == stream && it->second.device().index() == device
        && (found == map.map.end() || std::get<0>(found->first) == handle))
      found = it;
  if (found == map.map.end())
    return nullptr;  // no call on this stream uses this map yet
  auto& mine = kept.by_stream[key];
  mine = std::move(found->second);
  found->second = alias_of(mine);
  return &mine;
}

} // namespace

struct shared_workspace_scope::replaced {
  at::cuda::WorkspaceMapWithMutex* map = nullptr;
  workspace_key key;
  std::optional<at::DataPtr> before;  ///< none: there was no entry
};

shared_workspace_scope::shared_workspace_scope(c10::cuda::CUDAStream training,
                                               c10::cuda::CUDAStream capture) {
  void* handle = nullptr;
  {
    // cuBLAS warns on a thread without a current CUDA context: a guard to
    // the device current already sets none.
    c10::cuda::set_device(training.device_index(), /*force=*/true);
    // The thread's handle; on the actor's first call this makes its own
    // workspace for `training`, which goes back to that stream's blocks below.
    c10::cuda::CUDAStreamGuard on_training(training);
    handle = at::cuda::getCurrentCUDABlasHandle();
  }
  void* stream = training.stream();
  auto device = training.device_index();
  std::vector<at::DataPtr> dropped;  // freed after the locks
  for (auto* map : {&at::cuda::cublas_handle_stream_to_workspace(),
                    &at::cuda::cublaslt_handle_stream_to_workspace()}) {
    std::unique_lock lock(map->mutex);
    const auto* mine = kept_workspace(*map, device, stream, handle);
    if (!mine)
      continue;
    for (void* on : {stream, static_cast<void*>(capture.stream())}) {
      workspace_key key{handle, on};
      auto it = map->map.find(key);
      if (it != map->map.end() && it->second.get() == mine->get())
        continue;
      if (on != stream) {
        auto r = std::make_unique<replaced>();
        r->map = map;
        r->key = key;
        if (it != map->map.end())
          r->before = std::move(it->second);
        replaced_.push_back(std::move(r));
      } else if (it != map->map.end()) {
        dropped.push_back(std::move(it->second));
      }
      map->map.insert_or_assign(key, alias_of(*mine));
    }
    shared_.push_back({mine->get(), map == &at::cuda::cublas_handle_stream_to_workspace()
                                        ? at::cuda::getChosenWorkspaceSize()
                                        : at::cuda::getCUDABlasLtWorkspaceSize()});
  }
}

shared_workspace_scope::~shared_workspace_scope() {
  std::vector<at::DataPtr> dropped;  // freed after the locks
  for (auto& r : replaced_) {
    std::unique_lock lock(r->map->mutex);
    auto it = r->map->map.find(r->key);
    if (it != r->map->map.end())
      dropped.push_back(std::move(it->second));  // the alias: owns nothing
    if (r->before)
      r->map->map.insert_or_assign(r->key, std::move(*r->before));
    else if (it != r->map->map.end())
      r->map->map.erase(it);
  }
}

} // namespace gradd::cuda
