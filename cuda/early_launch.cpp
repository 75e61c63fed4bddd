// A graph launched before its backward's lift (see backward_graph.hpp).
//
// Note [Early launch]
// On a graph hit the GPU waited for the whole lift (the saved tensors read
// through `compiled_args` and the shape key): 31–53% of the gap to the
// floor on the H200. In a steady training loop the lift finds what the
// last replay found: the same shape, every input at the same address. So a
// structure whose last two graph-path backwards had one shape launches
// that shape's graph right after the walk, as the last replay left it, and
// lifts while the GPU runs. The lift then checks the bet: if the shape and
// every input's address are the ones the graph read, the gradients it
// wrote are handed out; if an input moved, the graph is pointed at it and
// launched again over the first launch's outputs; if the shape differs,
// the first launch's outputs are abandoned and the backward goes on as any
// other (another graph or the plan). Nothing of a lost bet is handed out:
// lent gradients are taken back before the first launch, as for any replay.
//
// A lost bet reads the addresses of the backward before, whose tensors
// may be gone. Reading memory that is not mapped any more kills the CUDA
// context; reading memory that now holds something else is harmless when
// nothing is written there and the outputs are thrown away, but not for an
// index: a stale one sends a kernel out of bounds or trips its device
// assert (seen on the H200: convnet's `nll_loss` backward read its targets
// stale and asserted, which ends the process's CUDA context). So a graph
// launches early only if
// - no bound input is an integer (floating, complex and boolean ones are
//   read as data, not as addresses) and no replay writes into one
//   (checked once, at capture, by a replay on copies; its own static
//   buffers and pool it may write);
// - it copies no input: a copy needs the live addresses, which only the
//   lift knows;
// - at its last replay no input had moved, and every address it read lay
//   in a storage of the CUDA caching allocator (its deleter), with caching
//   on: such memory stays mapped until the allocator frees or unmaps a
//   segment;
// - the device's count of segment frees and unmaps
//   (`DeviceStats::num_device_free`: `empty_cache`, a retry after an
//   out-of-memory, a released graph pool, expandable segments shrinking)
//   has not changed since that replay.
// Parameters are read where they were captured; a moved one shows at the
// lift (fit::parameter_moved), and its old address counts as above.
// `cuda_graphs.early_launch: false` turns it off; `graph_early_launches`
// and `graph_early_misses` count bets and lost ones.

#include "cuda/backward_graph.hpp"

#include "cuda/graph_cache.hpp"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/env.h>

namespace gradd::cuda {

namespace {

namespace allocator = c10::cuda::CUDACachingAllocator;

/// Whether memory of the process's CUDA allocator stays mapped until it
/// counts a segment free: the native caching allocator, caching.
bool allocator_counts_frees() {
  static const bool counts = allocator::get()->name() == "native"
                             && c10::utils::check_env("PYTORCH_NO_CUDA_MEMORY_CACHING") != true;
  return counts;
}

/// Segments the caching allocator has freed or unmapped on `device`.
int64_t segment_frees(c10::DeviceIndex device) {
  return allocator::getDeviceStats(device).num_device_free;
}

} // namespace

backward_graph::early_launch::~early_launch() {
  if (replaying_.owns_lock())  // neither confirmed nor redone
    graph_cache::instance().counters.early_misses.fetch_add(1, std::memory_order_relaxed);
}

std::optional<backward_graph::early_launch>
backward_graph::launch_early(c10::cuda::CUDAStream stream) {
  std::unique_lock replaying(replaying_, std::try_to_lock);
  if (!replaying || !launchable_at_frees_ || *launchable_at_frees_ != segment_frees(device_))
    return std::nullopt;
  c10::cuda::CUDAGuard device(stream.device_index());
  follow_caller(stream);
  take_back_lent(stream);
  C10_CUDA_CHECK(cudaGraphLaunch(exec_, stream.stream()));
  replayed_->record(stream);
  graph_cache::instance().counters.early_launches.fetch_add(1, std::memory_order_relaxed);
  return early_launch(std::move(replaying));
}

void backward_graph::note_addresses(const std::vector<at::Tensor>& live, bool moved) {
  if (moved || !stale_reads_harmless_ || !allocator_counts_frees())
    return;
  // Memory of the caching allocator carries its deleter.
  auto caching = allocator::get()->raw_deleter();
  for (size_t i = 0; i < live.size(); ++i)
    if (live[i].defined() && (borrowed_[i] || inputs_[i].is_meta())
        && live[i].storage().data_ptr().get_deleter() != caching)
      return;
  launchable_at_frees_ = segment_frees(device_);
}

} // namespace gradd::cuda
