// Lent gradients (see lent_gradients.hpp).
//
// Note [Lent gradients]
// A replay writes every leaf gradient into the same buffer of the graph's
// pool. Handing that buffer out as `.grad` costs nothing, but the next
// replay would overwrite it under whoever still holds it. So a hand-out is
// a tensor on a storage of its own ("lent") that points at the buffer and
// keeps it from the pool, and the graph keeps that storage. Before the next
// launch, a lent storage that someone else still holds (a `.grad` not set
// to None, a view of it, a hook's copy of the handle) gets memory of its
// own holding the old values: every tensor on it keeps what it had (copy
// on write), and later hand-outs get a fresh lent storage. Gradients that
// are views of one buffer share one lent storage, as their stock
// counterparts share theirs. In the usual loop (`zero_grad(set_to_none=True)`
// or the optimizer dropping `.grad`) nothing holds it and no copy is made.
// A gradient the stock engine would not have stolen (the same tensor is
// another output or an input, or its strides break the layout contract)
// and `hand_out: copy` go through the stock AccumulateGrad with the lent
// tensor still referenced, so it copies.
// The pool is shared with the stream's other graphs, whose launches
// overwrite it too: a lent storage is taken back before any launch in the
// pool, not only this graph's, and on the thread that launches (Note [One
// pool per stream]). Nothing else takes it back: a graph that goes while
// its gradients are held (evicted on the stream actor's thread, dropped by
// reset()) leaves them where they are, the pool keeping them till its next
// launch and their holders keeping their memory after that.
// The allocator knows a buffer's capture stream only, so each buffer is
// recorded as used on the streams its gradients are handed out on: when
// its memory goes back to the pool (graph and holders gone), the reads
// its holders queued there come before its next user. The backward's own
// stream is recorded at capture, on the stream actor's thread between its
// captures: a use recorded while any thread of the process captures on
// the device is also filed as the capture's, and dropped again where the
// buffer is freed during a capture (PyTorch's allocator assumes such a use
// ended with the capture), which a hand-out on the training thread during
// a sweep's background capture would meet.

#include "cuda/lent_gradients.hpp"

#include "cuda/graph_cache.hpp"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>

namespace gradd::cuda {

namespace {

/// A storage on `buffer`'s memory that holds `buffer`'s storage, so that a
/// gradient kept past its graph keeps its memory from the pool.
c10::intrusive_ptr<c10::StorageImpl> lent_storage_of(const at::Tensor& buffer) {
  const auto& storage = buffer.storage();
  auto* owner = new c10::Storage(storage);
  c10::DataPtr data(storage.mutable_data(), owner,
                    [](void* held) { delete static_cast<c10::Storage*>(held); }, buffer.device());
  return c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(),
                                               storage.nbytes(), std::move(data),
                                               /*allocator=*/nullptr, /*resizable=*/false);
}

} // namespace

size_t lent_gradients::lend(const at::Tensor& buffer) {
  const void* memory = buffer.storage().data();
  auto same = std::find_if(storages_.begin(), storages_.end(),
                           [&](const storage& s) { return s.buffer.storage().data() == memory; });
  if (same != storages_.end())
    return static_cast<size_t>(same - storages_.begin());
  TORCH_INTERNAL_ASSERT(recorded_on_.empty(), "lent after a stream was recorded");
  storages_.push_back({buffer, lent_storage_of(buffer)});
  return storages_.size() - 1;
}

at::Tensor lent_gradients::tensor(size_t index, const at::Tensor& like) const {
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(storages_[index].lent),
                                                   like.key_set(), like.dtype());
  impl->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  return at::Tensor(std::move(impl));
}

void lent_gradients::record_use_on(c10::cuda::CUDAStream stream) {
  if (std::find(recorded_on_.begin(), recorded_on_.end(), stream) != recorded_on_.end())
    return;
  for (const auto& s : storages_)
    c10::cuda::CUDACachingAllocator::recordStream(s.buffer.storage().data_ptr(), stream);
  recorded_on_.push_back(stream);
}

void lent_gradients::hand_out_on(c10::cuda::CUDAStream stream) {
  record_use_on(stream);
  handed_out_on_ = stream;
  handed_out_by_ = std::this_thread::get_id();
}

bool lent_gradients::held_by_another_thread() const {
  return handed_out_by_ != std::this_thread::get_id()
         && std::any_of(storages_.begin(), storages_.end(),
                        [](const storage& s) { return s.lent.use_count() > 1; });
}

void lent_gradients::take_back() {
  for (auto& s : storages_) {
    if (s.lent.use_count() == 1)
      continue;
    // Allocated and filled on the stream its holders were handed it on:
    // after what they did with it (the backward joined that stream), before
    // what they do next.
    c10::cuda::CUDAStreamGuard on_holders(*handed_out_on_);
    auto nbytes = s.lent->nbytes();
    auto own = c10::cuda::CUDACachingAllocator::get()->allocate(nbytes);
    C10_CUDA_CHECK(cudaMemcpyAsync(own.get(), s.buffer.storage().data(), nbytes,
                                   cudaMemcpyDeviceToDevice, handed_out_on_->stream()));
    s.lent->set_data_ptr_noswap(std::move(own));
    s.lent = lent_storage_of(s.buffer);
    graph_cache::instance().counters.copy_on_writes.fetch_add(1, std::memory_order_relaxed);
  }
}

} // namespace gradd::cuda
