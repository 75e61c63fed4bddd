#pragma once

// The CUDA graphs of every structure, by shape, with what the dynamic-shape
// policy remembers about each structure. The stream actors write it; the
// backward's thread reads a structure's published table without a lock
// (Note [Published graphs], graph_cache.cpp).

#include "cuda/backward_graph.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace gradd::cuda {

/// Nanoseconds from `start` to `end`, for the counters' CPU times.
inline uint64_t nanoseconds_between(std::chrono::steady_clock::time_point start,
                                    std::chrono::steady_clock::time_point end) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count());
}

/// One shape of a structure: its graph, or none yet while it is captured.
struct shape_slot {
  std::shared_ptr<backward_graph> graph;
  /// While none: the request of its capture, till its stream actor takes it.
  std::shared_ptr<capture_request> pending;
  bool probed = false;  ///< its probe key is learnt (Note [Shape probe])
};

/// A captured shape as the hit path sees it.
struct published_shape {
  std::shared_ptr<backward_graph> graph;
  bool probed = false;
};

/// What a structure's hits read, immutable once published: its graphs by
/// shape, and what a bet goes by.
struct published_graphs {
  std::unordered_map<uint64_t, published_shape> shapes;  ///< captured ones only
  /// Graphs by their shape's probe key, where the key names one shape.
  std::unordered_map<uint64_t, std::shared_ptr<backward_graph>> probed;
  bool bets_by_probe = false;  ///< every graph's probe is learnt, and there are several
  bool plan_only = false;      ///< the structure stays on plans
};

/// The graphs of one structure (one plan) and its shape history.
struct structure_graphs {
  structure_graphs();

  /// The table the hit path reads: one atomic load, no lock.
  std::shared_ptr<const published_graphs> published() const {
    return published_.load(std::memory_order_acquire);
  }

  /// Publishes what `shapes`, `probed_shapes` and `plan_only` say now.
  /// Call with `mutex` held, after changing any of them.
  void publish();

  std::mutex mutex;  ///< guards what follows up to the atomics
  std::unordered_map<uint64_t, shape_slot> shapes;  ///< captured or being captured
  std::unordered_map<uint64_t, uint32_t> seen;      ///< auto: shapes met, and how often
  /// Per shape, the inputs its graphs copy (capture_request::copied).
  std::unordered_map<uint64_t, std::vector<uint32_t>> copied_inputs;
  std::string plan_only;  ///< why this structure stays on plans; "" while it may get graphs
  /// Shapes whose capture ran out of device memory, and when they may be
  /// captured again (fallback.retry_after_ms later): till then they stay
  /// on plans, and the structure's other shapes keep their graphs.
  std::unordered_map<uint64_t, std::chrono::steady_clock::time_point> out_of_memory;
  /// Shapes by their probe's key (Note [Shape probe]); nullopt for a key
  /// that two shapes share.
  std::unordered_map<uint64_t, std::optional<uint64_t>> probed_shapes;
  bool probe_fails = false;  ///< its probe has no key (a symbolic or nested shape): no bets by probe
  uint32_t parameter_moves = 0;  ///< graphs dropped for a parameter at another address

  // Written by the hit path without the mutex.
  std::atomic<uint64_t> clock{0};  ///< ticks once per replay and capture, for least-recently-used eviction
  std::atomic<uint64_t> last_shape{0};  ///< the shape key of the last backward lifted here
  std::atomic<bool> steady{false};  ///< the last two had one shape: worth a bet (Note [Early launch])
  std::atomic<uint64_t> graph_backwards{0};  ///< served by its graphs
  /// Its nodes were found fit for graphs (no hooks inside the graph, no
  /// Python node): once per structure, whose key fixes the nodes' types and
  /// hook counts.
  std::atomic<bool> nodes_vetted{false};
  /// Its memory-efficient attention nodes (Note [Dropout seeds on the
  /// device]), and how many nodes its node table cuts its graphs at (Note
  /// [Piecewise graphs]); written once under the mutex, before nodes_vetted
  /// is set, read after.
  std::vector<uint32_t> attention_nodes;
  size_t table_cuts = 0;
  /// Its replays call nodes live (calls_nodes_live), inside libtorch's
  /// graph task: its backwards place no bets before the engine. Set with
  /// the vetting; a structure bet on has graphs, so was vetted.
  std::atomic<bool> calls_live{false};

  /// Notes that `shape`'s probe has key `probe`; nullopt: that it has none.
  /// Call with `mutex` held.
  void learn_probe(uint64_t shape, std::optional<uint64_t> probe);

  /// Notes that a backward of `shape` was lifted here: whether the last
  /// two had one shape (a steady loop, worth a bet). No lock.
  void note_shape(uint64_t shape) noexcept {
    steady.store(last_shape.exchange(shape, std::memory_order_relaxed) == shape,
                 std::memory_order_relaxed);
  }

  /// Marks `graph` used now, by this structure's clock. No lock.
  void mark_used(backward_graph& graph) noexcept {
    graph.mark_used(clock.fetch_add(1, std::memory_order_relaxed) + 1);
  }

  /// Takes out least recently used graphs (never a shape being captured)
  /// until at most `max_graphs` remain, and returns them: the caller lets
  /// them go after unlocking (each waits for its last replay). Call with
  /// `mutex` held.
  std::vector<std::shared_ptr<backward_graph>> evict_beyond(uint32_t max_graphs);

private:
  std::atomic<std::shared_ptr<const published_graphs>> published_;
};

/// Counters of the CUDA graph path, bumped from any thread.
struct graph_counters {
  std::atomic<uint64_t> graph_backwards{0};   ///< backwards a graph served
  std::atomic<uint64_t> piecewise_backwards{0};  ///< of those, calling nodes live (Note [Live leaves])
  std::atomic<uint64_t> eager_rests{0};  ///< of those, finished eagerly after a cut (Note [Piecewise graphs])
  std::atomic<uint64_t> captures{0};          ///< graphs captured
  std::atomic<uint64_t> capture_failures{0};  ///< captures that failed (structure, or shape out of memory, then plan-only)
  std::atomic<uint64_t> evictions{0};
  std::atomic<uint64_t> copy_on_writes{0};    ///< lent gradients copied away (Note [Lent gradients])
  std::atomic<uint64_t> lent_elsewhere{0};    ///< hits left to plans: gradients lent to another thread held
  std::atomic<uint64_t> other_stream{0};      ///< hits left to plans: the graph reads another stream's cuBLAS workspace
  std::atomic<uint64_t> during_capture{0};    ///< backwards a plan served while their shape was captured
  std::atomic<uint64_t> recordings{0};        ///< plan-served backwards kept for a capture
  std::atomic<uint64_t> rewrites{0};          ///< graph nodes pointed at moved inputs (Note [Bound inputs])
  std::atomic<uint64_t> early_launches{0};    ///< graphs launched before the lift (Note [Early launch])
  std::atomic<uint64_t> early_misses{0};      ///< of those, launched again or abandoned
  std::atomic<uint64_t> bets_before_engine{0};  ///< of those, launched before Engine::execute
  std::atomic<uint64_t> hits_before_engine{0};  ///< graph backwards served without Engine::execute
  std::atomic<uint64_t> bets_before_walk{0};  ///< of bets_before_engine, launched before the walk
  // CPU time of each piece of the graph hits, summed over graph_backwards.
  std::atomic<uint64_t> walk_ns{0};  ///< the walk, plan lookup and graph checks (before the engine, for a bet placed there)
  std::atomic<uint64_t> lift_ns{0};      ///< re-lift through compiled_args and the shape key
  std::atomic<uint64_t> copy_ns{0};      ///< misfit check, copy-on-write, batched copy launch
  std::atomic<uint64_t> launch_ns{0};    ///< the graph launch, with an early launch's bet
  std::atomic<uint64_t> cuda_launch_ns{0};  ///< of launch_ns, the cudaGraphLaunch calls
  std::atomic<uint64_t> live_read_ns{0};  ///< of launch_ns, an early launch's holders lifted alone
  std::atomic<uint64_t> hand_out_ns{0};  ///< gradients to .grad, results cloned, saved variables let go
  std::atomic<int64_t> bytes{0};              ///< device memory all graphs hold
  std::atomic<int64_t> bound_bytes{0};        ///< inputs all graphs read in place (Note [Bound inputs])
  std::atomic<int64_t> graphs{0};             ///< graphs alive

  void reset() noexcept;
};

/// The process's graphs. Never destroyed (CUDA may be gone at static
/// destruction).
class graph_cache {
public:
  static graph_cache& instance();

  /// The graphs of structure `id`, created empty on first use.
  std::shared_ptr<structure_graphs> structure(uint64_t id);

  /// Structure `id`'s graphs, or null where the graph path never saw it.
  std::shared_ptr<structure_graphs> find(uint64_t id);

  /// Drops every graph (reset()); graphs a backward is replaying go when it
  /// ends.
  void clear();

  graph_counters counters;

private:
  std::shared_mutex mutex_;
  std::unordered_map<uint64_t, std::shared_ptr<structure_graphs>> structures_;
};

} // namespace gradd::cuda
