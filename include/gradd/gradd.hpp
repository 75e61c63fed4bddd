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

#include "gradd/policy.hpp"
#include "gradd/settings.hpp"
#include "gradd/statistics.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace gradd {

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

/// Synchronizes the current CUDA device, as torch::cuda::synchronize does,
/// once no CUDA graph capture of gradd's is in flight: a device synchronize
/// during a capture would fail (Note [Device synchronizes during captures],
/// cuda/capture_gate.hpp). A program linked with libgradd ahead of libtorch
/// gets this for every device synchronize; others call it. Without a CUDA
/// device it raises as torch::cuda::synchronize does (c10::Error).
void synchronize_device();

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
