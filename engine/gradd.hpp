#pragma once

// gradd's in-process API: the one header a training program includes.
//
// gradd takes over every backward() and autograd::grad() of the process while
// it is enabled: it captures the autograd graph, compiles it into a plan and
// runs the plan instead of libtorch's stock engine, with the stock engine's
// gradients. What it cannot run goes to the stock engine, counted by reason.
//
//   gradd::enable_guard on;          // gradd serves backwards in this scope
//   loss.backward();
//   std::cout << gradd::stats();     // who served them
//
// Threading contract. Every function here may be called from any thread,
// while backwards run on others: gradd's mode (enabled or not, its settings,
// its compile pipeline) is one per process, and changes to it are applied
// one at a time. A backward that has started finishes in the mode it
// started in; the next one sees the new mode. Guards open scopes on that
// process-wide mode and may end in any order, on any thread: when one ends,
// the innermost scope still open applies, and once all have ended the mode
// set outside them is back. Disabling or changing settings interrupts the
// compiles in flight (they settle as failed at their next step and compile
// again later) and waits for them at most 5 s. Process exit (returning from
// main, exit()) unhooks gradd and interrupts its compiles within 2 s; a
// thread still inside a backward finishes it on the stock engine's terms.

#include "config/loader.hpp"
#include "config/settings.hpp"

#include <array>
#include <chrono>
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

/// Enables gradd for the whole process with `config`, replacing the settings
/// of an earlier enable() (inside a guard: the guard's scope), and starts its
/// compile pipeline. Throws config_error, changing nothing, if `config`
/// cannot be used (logging.ir_dump_dir not a folder gradd can write in).
void enable(const settings& config = default_settings());

/// Enables gradd with the policy file at `config_path` (see load_settings).
void enable(const std::string& config_path);

/// Disables gradd: later backwards run on the stock engine untouched. Stops
/// the pipeline, interrupting the compiles in flight.
void disable();

/// Whether gradd serves backwards now.
bool is_enabled() noexcept;

/// Drops every cached plan and zeroes the statistics. Thread-safe; backwards
/// that already hold a plan finish with it; compiles in flight are
/// interrupted, and backwards waiting for them (compile.mode: sync) go on at
/// once on the stock engine.
void reset();

/// Returns the statistics. Thread-safe.
statistics stats();

/// Returns each captured structure's statistics, with what CUDA graphs
/// cover of it. Thread-safe.
std::vector<graph_statistics> graph_stats();

/// Waits until no compile and no CUDA graph capture is in flight, at most
/// `timeout`; returns whether all is idle. Useful before timing, and in
/// tests.
bool wait_for_compiles(std::chrono::milliseconds timeout = std::chrono::seconds(30));

/// Enables gradd for a scope, as PyTorch's compiled_autograd._enable; when
/// it ends, the enclosing scope's mode (hook, settings, pipeline) is back.
class enable_guard {
public:
  explicit enable_guard(const settings& config = default_settings());
  explicit enable_guard(const std::string& config_path);
  ~enable_guard();
  enable_guard(const enable_guard&) = delete;
  enable_guard& operator=(const enable_guard&) = delete;

private:
  uint64_t scope_;
};

/// Disables gradd for a scope, as compiled_autograd._disable; when it ends,
/// the enclosing scope's mode is back. Backwards in the scope run on the
/// stock engine untouched; the pipeline of the enclosing mode keeps running,
/// so compiles in flight land and leaving the scope costs nothing.
class disable_guard {
public:
  disable_guard();
  ~disable_guard();
  disable_guard(const disable_guard&) = delete;
  disable_guard& operator=(const disable_guard&) = delete;

private:
  uint64_t scope_;
};

} // namespace gradd
