#pragma once

// The CUDA graphs of every structure, by shape, with what the dynamic-shape
// policy remembers about each structure. The stream actors write it; the
// backward's thread reads it under one short lock per backward.

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
  uint64_t last_used = 0;  ///< structure_graphs::clock at its last replay, or its capture
  bool probed = false;     ///< its probe key is learnt (Note [Shape probe])
};

/// The graphs of one structure (one plan) and its shape history.
struct structure_graphs {
  std::mutex mutex;  ///< guards everything below
  std::unordered_map<uint64_t, shape_slot> shapes;  ///< captured or being captured
  std::unordered_map<uint64_t, uint32_t> seen;      ///< auto: shapes met, and how often
  /// Per shape, the inputs its graphs copy (capture_request::copied).
  std::unordered_map<uint64_t, std::vector<uint32_t>> copied_inputs;
  std::string plan_only;  ///< why this structure stays on plans; "" while it may get graphs
  /// Shapes whose capture ran out of device memory, and when they may be
  /// captured again (fallback.retry_after_ms later): till then they stay
  /// on plans, and the structure's other shapes keep their graphs.
  std::unordered_map<uint64_t, std::chrono::steady_clock::time_point> out_of_memory;
  uint64_t clock = 0;     ///< ticks once per replay and capture, for least-recently-used eviction
  uint64_t last_shape = 0;  ///< the shape key of the last backward lifted here
  bool steady = false;      ///< the last two had one shape: worth a bet (Note [Early launch])
  /// Shapes by their probe's key (Note [Shape probe]); nullopt for a key
  /// that two shapes share.
  std::unordered_map<uint64_t, std::optional<uint64_t>> probed_shapes;
  bool probe_fails = false;  ///< its probe has no key (a symbolic or nested shape): no bets by probe
  uint32_t parameter_moves = 0;  ///< graphs dropped for a parameter at another address
  std::atomic<uint64_t> graph_backwards{0};  ///< served by its graphs; read without the mutex
  /// Its nodes were found fit for graphs (no hooks inside the graph, no
  /// Python node): once per structure, whose key fixes the nodes' types and
  /// hook counts. Read without the mutex.
  std::atomic<bool> nodes_vetted{false};
  /// Its memory-efficient attention nodes (Note [Dropout seeds on the
  /// device]), and how many nodes its node table cuts its graphs at (Note
  /// [Piecewise graphs]); written once, before nodes_vetted is set, read
  /// after.
  std::vector<uint32_t> attention_nodes;
  size_t table_cuts = 0;
  /// Its replays call nodes live (calls_nodes_live), inside libtorch's
  /// graph task: its backwards place no bets before the engine. Set with
  /// the vetting; a structure bet on has graphs, so was vetted.
  std::atomic<bool> calls_live{false};

  /// Notes that `shape`'s probe has key `probe`; nullopt: that it has none.
  /// Call with `mutex` held.
  void learn_probe(uint64_t shape, std::optional<uint64_t> probe);

  /// Whether every graph held has its probe key learnt, and there are
  /// several: then bets go by probe. Call with `mutex` held.
  bool bets_by_probe() const;

  /// The graph of the shape probe key `probe` names alone, or null. Call
  /// with `mutex` held.
  std::shared_ptr<backward_graph> graph_probed(uint64_t probe) const;

  /// Takes out least recently used graphs (never a shape being captured)
  /// until at most `max_graphs` remain, and returns them: the caller lets
  /// them go after unlocking (each waits for its last replay). Call with
  /// `mutex` held.
  std::vector<std::shared_ptr<backward_graph>> evict_beyond(uint32_t max_graphs);
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
