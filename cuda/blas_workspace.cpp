// The cuBLAS workspaces of a stream actor's capture (see blas_workspace.hpp).
//
// Note [One cuBLAS workspace per training stream]
// PyTorch gives every (cuBLAS handle, stream) a workspace of its own, 32 MiB
// on Hopper, and cuBLASLt a second map of them (CublasHandlePool.cpp);
// handles are per thread. A graph that calls cuBLAS reads a workspace at
// every replay, and one per graph pool would be one more 32 MiB for as long
// as its graphs lived, a third of a small model's training step. So a
// graph reads the workspace of the training stream's own calls, and
// replays on that stream only (backward_graph::launches_on), queued by the
// training thread between its own calls.
//
// A capture cannot share that workspace. Its eager work (the recording, the
// warm-up) and its binding trials run on the training stream from the
// stream actor's thread while the training thread queues its own work
// there, and one cuBLAS call can be several launches that share the
// workspace: a product split along its inner dimension writes partial
// sums there and a second kernel reduces them. A launch of the other
// thread landing between the two overwrites the sums (on an H100, up to 81
// of 400 products in the hidden case [workspace-race]). So for a capture
// the actor's calls, on the training stream and on its capture stream, use
// workspaces of the capture's own: in order on the training stream, and
// given back to the device at its end (PyTorch's allocator would keep them
// reserved). Once the trials are done, the graph's pointers into them move
// to the training stream's workspace (move_pointers: words of kernel
// arguments, memset and memcpy addresses). A pointer no argument shows
// would not move; [cuda] checks that cuBLAS's kernels reach their workspace
// through their arguments only (blas_workspace_test.cpp).
//
// A driver that cannot tell a kernel's argument layout (before CUDA 12.4)
// leaves the pointers where they are: the graph keeps the workspaces it was
// captured on, one more 32 MiB or two per graph, instead of none.
//
// gradd takes the training stream's workspace into its keeping and leaves
// the map an entry that owns nothing, so that clearCublasWorkspaces() (a
// common way to free memory) cannot free it under a graph; the training
// stream's calls then make a new one. Where the training stream has none
// yet (no cuBLAS call there), a capture's own becomes it. The maps and
// their mutexes are PyTorch's exported ones (ATen/cuda/CUDAContextLight.h).

#include "cuda/blas_workspace.hpp"

#include <ATen/cuda/CUDAContextLight.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
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

/// Device memory queued for release on a stream, with its stream.
struct stream_ordered {
  void* memory = nullptr;
  cudaStream_t stream = nullptr;
};

void release_stream_ordered(void* context) {
  auto* allocation = static_cast<stream_ordered*>(context);
  (void)cudaFreeAsync(allocation->memory, allocation->stream);
  delete allocation;
}

/// `bytes` of device memory in order on `stream`, given back to the device
/// in order on it: not cached by PyTorch's allocator, so that a capture's
/// workspaces reserve nothing once it is done.
at::DataPtr stream_ordered_bytes(c10::cuda::CUDAStream stream, size_t bytes) {
  void* memory = nullptr;
  auto status = cudaMallocAsync(&memory, bytes, stream.stream());
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    TORCH_CHECK_WITH(OutOfMemoryError, false, "gradd: no ", bytes,
                     " bytes for a capture's cuBLAS workspace");
  }
  C10_CUDA_CHECK(status);
  return at::DataPtr(memory, new stream_ordered{memory, stream.stream()}, &release_stream_ordered,
                     stream.device());
}

/// The calling thread's cuBLAS handle on `training`'s device. PyTorch's
/// call makes the handle a workspace for the current stream where it has
/// none: asked once per thread, so that only a thread's first capture pays
/// for one.
void* blas_handle(c10::cuda::CUDAStream training) {
  thread_local std::map<c10::DeviceIndex, void*> handles;
  auto [it, first] = handles.try_emplace(training.device_index(), nullptr);
  if (first) {
    c10::cuda::CUDAStreamGuard on_training(training);
    it->second = at::cuda::getCurrentCUDABlasHandle();
  }
  return it->second;
}

/// An entry pointing at `memory` that owns nothing.
at::DataPtr alias_of(const at::DataPtr& memory) {
  return at::DataPtr(memory.get(), memory.device());
}

} // namespace

struct capture_workspaces::workspace {
  at::cuda::WorkspaceMapWithMutex* map = nullptr;
  size_t bytes = 0;
  c10::DeviceIndex device = 0;
  void* handle = nullptr;
  void* training = nullptr;
  void* capture = nullptr;
  at::DataPtr own;
  std::optional<at::DataPtr> capture_before;  ///< none: there was no entry

  /// The workspace gradd keeps for the training stream in this map, taken
  /// on first use from the map's entry of another handle for that stream
  /// (the training thread's), which then owns nothing; null where there is
  /// none. Call with the map's mutex held.
  const at::DataPtr* kept() {
    auto& kept = kept_workspaces::instance();
    std::lock_guard lock(kept.mutex);
    auto key = std::make_tuple(static_cast<const void*>(map), device, training);
    if (auto it = kept.by_stream.find(key); it != kept.by_stream.end())
      return &it->second;
    // An entry that owns nothing aliases another's: gradd's kept one, or
    // the own workspace of a capture whose capture stream this one trains on.
    for (auto& [entry, memory] : map->map)
      if (std::get<0>(entry) != handle && std::get<1>(entry) == training
          && memory.device().index() == device && memory.get_deleter() != nullptr) {
        auto& mine = kept.by_stream[key];
        mine = std::move(memory);
        memory = alias_of(mine);
        return &mine;
      }
    return nullptr;
  }

  /// Keeps `own` as the training stream's. Call with the map's mutex held.
  void keep_own() {
    auto& kept = kept_workspaces::instance();
    std::lock_guard lock(kept.mutex);
    auto key = std::make_tuple(static_cast<const void*>(map), device, training);
    kept.by_stream[key] = std::move(own);
  }
};

capture_workspaces::capture_workspaces(c10::cuda::CUDAStream training,
                                       c10::cuda::CUDAStream capture) {
  // cuBLAS warns on a thread without a current CUDA context: a guard to
  // the device current already sets none.
  c10::cuda::set_device(training.device_index(), /*force=*/true);
  void* handle = blas_handle(training);
  std::vector<at::DataPtr> dropped;  // freed after the locks
  for (auto* map : {&at::cuda::cublas_handle_stream_to_workspace(),
                    &at::cuda::cublaslt_handle_stream_to_workspace()}) {
    auto w = std::make_unique<workspace>();
    w->map = map;
    w->bytes = map == &at::cuda::cublas_handle_stream_to_workspace()
                   ? at::cuda::getChosenWorkspaceSize()
                   : at::cuda::getCUDABlasLtWorkspaceSize();
    w->device = training.device_index();
    w->handle = handle;
    w->training = training.stream();
    w->capture = capture.stream();
    try {
      w->own = stream_ordered_bytes(training, w->bytes);
    } catch (...) {
      put_back();  // the maps as they were: no destructor runs
      throw;
    }
    std::unique_lock lock(map->mutex);
    // The thread's own for the training stream, made by its first call
    // there, gives way to the scope's.
    if (auto it = map->map.find(workspace_key{handle, w->training}); it != map->map.end())
      dropped.push_back(std::move(it->second));
    map->map.insert_or_assign(workspace_key{handle, w->training}, alias_of(w->own));
    if (auto it = map->map.find(workspace_key{handle, w->capture}); it != map->map.end())
      w->capture_before = std::move(it->second);
    map->map.insert_or_assign(workspace_key{handle, w->capture}, alias_of(w->own));
    workspaces_.push_back(std::move(w));
  }
}

capture_workspaces::~capture_workspaces() {
  put_back();
}

void capture_workspaces::put_back() {
  std::vector<at::DataPtr> dropped;  // freed after the locks
  for (auto& w : workspaces_) {
    std::unique_lock lock(w->map->mutex);
    w->map->map.erase(workspace_key{w->handle, w->training});
    if (w->capture_before)
      w->map->map.insert_or_assign(workspace_key{w->handle, w->capture},
                                   std::move(*w->capture_before));
    else
      w->map->map.erase(workspace_key{w->handle, w->capture});
    dropped.push_back(std::move(w->own));
  }
  workspaces_.clear();
}

std::vector<device_range> capture_workspaces::own() const {
  std::vector<device_range> ranges;
  for (const auto& w : workspaces_)
    if (w->own)
      ranges.push_back({w->own.get(), w->bytes});
  return ranges;
}

std::vector<pointer_move> capture_workspaces::hand_over(const std::vector<device_range>& read) {
  std::vector<pointer_move> moves;
  for (auto& w : workspaces_) {
    if (std::none_of(read.begin(), read.end(),
                     [&](const device_range& r) { return w->own && r.begin == w->own.get(); }))
      continue;
    std::unique_lock lock(w->map->mutex);
    if (const auto* kept = w->kept()) {
      moves.push_back({{w->own.get(), w->bytes}, kept->get()});
    } else {
      // Aliased by the thread's entries until the scope ends.
      w->keep_own();
    }
  }
  return moves;
}

std::vector<at::DataPtr> capture_workspaces::give_up() {
  std::vector<at::DataPtr> given;
  for (auto& w : workspaces_)
    if (w->own)
      given.push_back(std::move(w->own));  // the thread's aliases go with the scope
  return given;
}

} // namespace gradd::cuda
