#pragma once

// What gradd reports: why backwards left it, its counters and each captured
// structure's state (gradd::stats(), gradd::graph_stats()). Every layer
// reports into these, so they sit below all of them.

#include <array>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gradd {

/// Why a backward ran on the stock engine instead of a plan.
enum class fallback_reason : uint8_t {
  force_eager,       ///< the settings ask for the stock engine
  create_graph,      ///< create_graph=true with gradients on a device (CPU ones run on plans)
  anomaly_mode,      ///< autograd anomaly detection is on
  nested_tensor,     ///< a nested tensor flows through the graph
  capture_hook,      ///< a deprecated grad-capture hook on an input
  compile_pending,   ///< the graph's plan is still compiling
  compile_error,     ///< gradd failed to compile the graph
};

/// Number of fallback reasons.
inline constexpr size_t fallback_reason_count = 7;

/// Returns the reason's name, e.g. "create_graph".
const char* to_string(fallback_reason reason) noexcept;

/// Counters since the process started or the last reset(). A snapshot:
/// counters of concurrent backwards may be mid-update.
struct statistics {
  uint64_t backwards = 0;        ///< backwards gradd's hook served, counted as they end
  uint64_t plan_backwards = 0;   ///< served by a plan
  uint64_t eager_backwards = 0;  ///< served by the stock engine
  /// Raised an error (a hook, a node, the NaN check, fallback.on_unsupported);
  /// once no backward runs, backwards = plan + eager + raised.
  uint64_t raised_backwards = 0;
  std::array<uint64_t, fallback_reason_count> eager_by_reason{};  ///< by fallback_reason
  uint64_t captures = 0;         ///< graphs captured into IR
  uint64_t plans_loaded = 0;     ///< of those, served by a plan kept in cache.dir, not compiled
  uint64_t cache_hits = 0;       ///< backwards whose structure had a plan
  uint64_t cache_misses = 0;     ///< backwards with a new structure
  uint64_t plans = 0;            ///< ready plans in the cache
  uint64_t compiles = 0;         ///< compiles finished (ready or failed)
  uint64_t compiles_in_flight = 0;  ///< compiles not finished yet
  // With a daemon (daemon.address, $GRADD_DAEMON); zero without one.
  uint64_t daemon_plans = 0;     ///< of compiles, plans the daemon sent (compiled, shared or kept)
  uint64_t daemon_fallbacks = 0; ///< graphs that went on without the daemon (daemon.fallback)
  // CUDA graphs (policy cuda_graphs); all zero on the CPU.
  uint64_t graph_backwards = 0;  ///< of plan_backwards, served by replaying a CUDA graph
  /// Of graph_backwards, those that called some of their nodes live around
  /// their graphs: leaves with hooks, and the nodes with hooks and Python
  /// Functions a graph is cut at (Note [Live leaves], Note [Piecewise
  /// graphs], docs/design.md).
  uint64_t piecewise_backwards = 0;
  /// Of piecewise_backwards, those where a cut node returned gradients laid
  /// out otherwise than when its graph was captured: the rest of that
  /// backward ran eagerly.
  uint64_t graph_eager_rests = 0;
  uint64_t graph_recordings = 0; ///< of plan_backwards, kept for a graph capture of their shape
  uint64_t backwards_during_capture = 0;  ///< served by plans while their shape was captured
  uint64_t graphs = 0;           ///< CUDA graphs alive
  uint64_t graph_bytes = 0;      ///< device memory they hold (static inputs and pools)
  uint64_t graph_bound_bytes = 0;  ///< inputs they read where they live, not copied into static ones
  uint64_t graph_rewrites = 0;   ///< graph nodes pointed at a bound input that had moved
  uint64_t graph_early_launches = 0;  ///< graphs launched before the saved tensors were read (cuda_graphs.early_launch)
  uint64_t graph_early_misses = 0;    ///< of those, lost bets: launched again or abandoned
  uint64_t graph_bets_before_engine = 0;  ///< of those, launched before libtorch's engine prepared the backward
  uint64_t graph_hits_before_engine = 0;  ///< graph backwards served before libtorch's engine saw them
  uint64_t graph_bets_before_walk = 0;    ///< of graph_bets_before_engine, launched before gradd's walk
  uint64_t graph_captures = 0;   ///< graphs captured
  uint64_t graph_capture_failures = 0;  ///< captures that failed: the structure stays on plans, or only the shape where the device ran out of memory
  uint64_t graph_evictions = 0;  ///< graphs evicted beyond cuda_graphs.max_graphs
  uint64_t graph_copy_on_writes = 0;  ///< lent gradients, still held, copied away before a launch in their pool
  uint64_t graph_lent_elsewhere = 0;  ///< graph hits left to plans: the pool's last gradients, lent on another thread, still held
  uint64_t graph_other_stream = 0;  ///< graph hits left to plans: the graph reads the cuBLAS workspace of the stream it was captured for, the backward ran on another
  /// CPU time of the pieces of the graph-served backwards, summed: the
  /// walk, the plan lookup and the graph path's checks (the hook's, and
  /// before the engine those of a bet placed there), the re-lift of saved
  /// tensors with the shape key, the copy-in (with the misfit check and
  /// copy-on-write), the graph launch (with an early launch's bet), the
  /// hand-out.
  uint64_t graph_walk_ns = 0;
  uint64_t graph_lift_ns = 0;
  uint64_t graph_copy_ns = 0;
  uint64_t graph_launch_ns = 0;
  uint64_t graph_cuda_launch_ns = 0;  ///< of graph_launch_ns, cudaGraphLaunch's own
  uint64_t graph_live_read_ns = 0;  ///< of graph_launch_ns, inputs read live for early launches
  uint64_t graph_hand_out_ns = 0;

  /// Backwards that fell back for `reason`.
  uint64_t eager_for(fallback_reason reason) const noexcept {
    return eager_by_reason[static_cast<size_t>(reason)];
  }
};

/// The statistics as (name, value) pairs, in a fixed order; backwards that
/// fell back appear as "eager.<reason>" for each reason that occurred.
std::vector<std::pair<std::string, uint64_t>> fields(const statistics& s);

/// Writes the statistics as one line of `name=value` pairs (fields()).
std::ostream& operator<<(std::ostream& out, const statistics& s);

/// Where a captured structure's compilation stands.
enum class graph_state : uint8_t {
  pending,  ///< compiling; the stock engine serves its backwards meanwhile
  ready,    ///< its plan serves its backwards
  failed,   ///< the stock engine serves it, for `graph_statistics::fallback`
};

/// Returns the state's name, e.g. "ready".
const char* to_string(graph_state state) noexcept;

/// One captured structure's statistics.
struct graph_statistics {
  uint64_t id = 0;
  graph_state state = graph_state::pending;
  uint32_t nodes = 0;            ///< autograd nodes in the graph
  uint64_t hits = 0;             ///< backwards its plan served
  uint64_t pending_backwards = 0;  ///< backwards that ran while it compiled
  uint64_t eager_backwards = 0;  ///< backwards the stock engine served for it
  uint64_t compiles = 0;
  double compile_ms = 0;         ///< capture to plan, in the pipeline
  std::optional<fallback_reason> fallback;  ///< why it failed, when failed
  // Its CUDA graphs (policy cuda_graphs); zero and empty on the CPU.
  uint32_t cuda_graphs = 0;      ///< alive, one per shape
  uint64_t graph_backwards = 0;  ///< its backwards a CUDA graph served
  /// Of `nodes`, those its graph backwards call live around the graph,
  /// hooks and all: the leaves with hooks (Note [Live leaves]) and the
  /// nodes its graphs are cut at (Note [Piecewise graphs]).
  uint32_t live_nodes = 0;
  /// The pieces each of its graphs is captured as: one more than the
  /// nodes it is cut at.
  uint32_t graph_pieces = 0;
  /// The nodes its graphs are cut at, by walk-order number and type, and
  /// why (hooks, a Python Function); empty where there is none.
  std::string cuts;
  /// Kernels, copies and memsets in its graphs (the driver's node count):
  /// each graph holds its whole backward, every node of it replayed.
  uint64_t graph_kernels = 0;
  /// Why it stays on plans under cuda_graphs, naming the node to blame
  /// where there is one; empty while it may get graphs.
  std::string plans_only;
};

} // namespace gradd
