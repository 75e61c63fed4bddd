#pragma once

// The gradients a CUDA graph hands out without cloning them, and their
// taking back before a launch that would overwrite them (Note [Lent
// gradients], lent_gradients.cpp).

#include <ATen/core/Tensor.h>
#include <c10/core/StorageImpl.h>
#include <c10/cuda/CUDAStream.h>

#include <optional>
#include <thread>
#include <vector>

namespace gradd::cuda {

/// One graph's outputs as its hand-outs see them, one lent storage per
/// storage of its outputs, and where its last hand-out went. The graph
/// holds it, and so does its pool while it is the pool's last hand-out,
/// past the graph's eviction (Note [One pool per stream]). Used under the
/// pool's turn only, but for lend() at capture.
class lent_gradients {
public:
  /// Lends `buffer`'s storage, once per storage; returns its index. At
  /// capture, before any record_use_on.
  size_t lend(const at::Tensor& buffer);

  /// A tensor on lent storage `index` with `like`'s geometry: what a
  /// hand-out gives.
  at::Tensor tensor(size_t index, const at::Tensor& like) const;

  /// Tells the caching allocator that the lent buffers are used on
  /// `stream`, once per stream: when a buffer's memory goes back to the
  /// pool, the reads queued there come first. Made at capture for the
  /// backward's stream, while the device has no capture underway (Note
  /// [Lent gradients]); a hand-out on another stream makes it there.
  void record_use_on(c10::cuda::CUDAStream stream);

  /// The streams record_use_on told the allocator of.
  const std::vector<c10::cuda::CUDAStream>& recorded_on() const noexcept {
    return recorded_on_;
  }

  /// Notes a hand-out by the calling thread whose holders use the
  /// gradients on `stream`.
  void hand_out_on(c10::cuda::CUDAStream stream);

  /// The stream of the last hand-out: where its holders may have reads of
  /// the gradients queued. Nullopt before the first.
  const std::optional<c10::cuda::CUDAStream>& handed_out_on() const noexcept {
    return handed_out_on_;
  }

  /// Whether the last hand-out was made on another thread than the calling
  /// one and some of it is still held.
  bool held_by_another_thread() const;

  /// Gives each lent storage someone still holds memory of its own, filled
  /// on the stream it was handed out on; later hand-outs get fresh ones.
  void take_back();

private:
  struct storage {
    at::Tensor buffer;  ///< an output on the graph's storage
    c10::intrusive_ptr<c10::StorageImpl> lent;
  };
  std::vector<storage> storages_;
  std::vector<c10::cuda::CUDAStream> recorded_on_;
  std::optional<c10::cuda::CUDAStream> handed_out_on_;
  std::thread::id handed_out_by_;
};

} // namespace gradd::cuda
