// The memory pool a stream actor's graphs share (see graph_pool.hpp).
//
// Note [One pool per stream]
// A graph's kernels write its intermediates and outputs into a private
// pool of the caching allocator. With a pool per graph, a structure swept
// over four shapes held four working sets (resnet18: 755 MB each, 2.4 GB
// for its sweep). The graphs one stream actor captures share one pool
// instead: a capture reuses the blocks the graphs before it freed at their
// end (their intermediates) and keeps clear of the blocks they still hold
// (their outputs). Three things follow.
// - A launch may overwrite the outputs of graphs captured after it: they
//   may lie in its intermediates. Their gradients may be lent out (Note
//   [Lent gradients]), so before any launch in the pool, the gradients of
//   the pool's last hand-out, whichever graph made it, are taken back.
//   Only those can still be held: every launch takes back the ones before
//   it. The pool keeps them (`last_lent`) even where their graph was
//   evicted meanwhile. Taking back swaps a storage's memory under its
//   holders, who must not be reading it then, so it is done on a launching
//   thread only: where the last hand-out was made on another thread and is
//   still held, a hit leaves its backward to the plan instead
//   (`graph_lent_elsewhere`). One thread per stream, the usual loop, never
//   meets this.
// - Two graphs of the pool must not run at once. A launch takes the pool's
//   turn, and holds it until what reads its outputs is queued (the
//   hand-out); the hit path never waits for the turn: a busy one leaves
//   that backward to its plan, as a busy graph did before. A launch on
//   another stream than the pool's last waits for that one (an event), and
//   for what was queued on the stream the last hand-out's gradients were
//   handed out on: reads of them made before their holders let go.
// - The stream actor's binding trials (Note [Bound inputs]) replay the new
//   graph while the training thread replays the others. Each trial takes
//   the turn too and copies the outputs it reads before letting go. A new
//   graph cannot overwrite the older graphs' outputs (they were held when
//   it was captured), so a trial takes nothing back.
// The pool belongs to its stream actor, held weakly: it goes with its last
// graph. The allocator frees a pool's segments only once every graph
// captured into it is gone, so a graph evicted under max_graphs gives its
// memory back to the pool, not to the device.

#include "cuda/graph_pool.hpp"

#include "cuda/graph_cache.hpp"
#include "cuda/lent_gradients.hpp"

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>

namespace gradd::cuda {

std::shared_ptr<graph_pool> graph_pool::make(c10::DeviceIndex device) {
  return std::shared_ptr<graph_pool>(new graph_pool(device));
}

graph_pool::graph_pool(c10::DeviceIndex device)
    : device_(device), id_(at::cuda::graph_pool_handle()) {
  // The allocator's count of the pool's users: this one, and each graph
  // captured into it. Without this one, the count reached zero whenever
  // the pool's graphs had all gone, with a capture into it under way: on
  // a Hopper GPU, where graphs were dropped while others were captured, the
  // allocator's count went below zero and ended the process.
  c10::cuda::CUDACachingAllocator::createOrIncrefPool(device_, id_);
}

graph_pool::~graph_pool() {
  last_lent.reset();  // its buffers back to the pool before the pool goes
  c10::cuda::CUDACachingAllocator::releasePool(device_, id_);
  graph_cache::instance().counters.bytes.fetch_sub(static_cast<int64_t>(counted_));
}

size_t graph_pool::recount() {
  size_t now = 0;
  for (const auto& segment : c10::cuda::CUDACachingAllocator::snapshot(id_, false).segments)
    if (segment.device == device_ && segment.owner_private_pool_id == id_)
      now += segment.total_size;
  // A pool's segments stay until every graph captured into it is gone.
  size_t grown = now > counted_ ? now - counted_ : 0;
  graph_cache::instance().counters.bytes.fetch_add(static_cast<int64_t>(grown));
  counted_ += grown;
  return grown;
}

graph_pool::turn graph_pool::try_take() {
  if (taken_.exchange(true, std::memory_order_acquire))
    return turn();
  return turn(shared_from_this());
}

graph_pool::turn graph_pool::take() {
  while (taken_.exchange(true, std::memory_order_acquire))
    taken_.wait(true, std::memory_order_relaxed);
  return turn(shared_from_this());
}

void graph_pool::let_go() noexcept {
  taken_.store(false, std::memory_order_release);
  taken_.notify_one();
}

graph_pool::turn& graph_pool::turn::operator=(turn&& other) noexcept {
  if (this != &other) {
    if (pool_)
      pool_->let_go();
    pool_ = std::move(other.pool_);
  }
  return *this;
}

graph_pool::turn::~turn() {
  if (pool_)
    pool_->let_go();
}

} // namespace gradd::cuda
