#pragma once

// gradd's compile pipeline: its stages (actors in the process's one CAF
// actor system) and their TBB arena, behind an interface free of CAF and TBB.
//
//   backward (miss) --submit--> capture --> pass pipeline --> compile --> registry
//                                  (each stage's work on the TBB arena)   |
//                                                     plan table <--------+
//
// With a daemon configured, submit goes to the daemon link first, which
// hands the daemon's plans to the registry and its failures to capture.
//
// A hit never touches it: the backward's thread reads the plan table.

#include "actors/daemon_feed.hpp"
#include "actors/plan_sink.hpp"
#include "compiler/ir.hpp"
#include "gradd/settings.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gradd::actors {

class pipeline {
public:
  /// Spawns the stages in the process's actor system (started on first use,
  /// one CAF worker: the stages only pass messages) and a TBB arena of
  /// compile.threads threads, settling graphs into `sink`; with a daemon
  /// configured (config/daemon_address.hpp), the daemon link too, counting
  /// into `feed` and reporting `own_statistics` to the daemon. `sink`
  /// and `feed` outlive the pipeline.
  pipeline(const settings& config, plan_sink& sink, daemon_feed& feed,
           std::function<statistics_fields()> own_statistics);

  /// Stops, as stop().
  ~pipeline();

  pipeline(const pipeline&) = delete;
  pipeline& operator=(const pipeline&) = delete;

  /// Sends the captured node table of graph `graph_id` (a pending record of
  /// the table) into the pipeline. Never blocks. Thread-safe. Returns false
  /// once the pipeline stops.
  bool submit(uint64_t graph_id, compiler::graph node_table);

  /// Sends this rank's proposal of the backward index from which graph
  /// `graph_id`'s held plan serves to the daemon (Note [Agreement across
  /// ranks]). Never blocks. Thread-safe. False without a daemon link.
  bool propose(uint64_t graph_id, uint64_t proposal);

  /// Waits until every graph submitted before the call has settled, at
  /// most `timeout`: a request to the registry. Thread-safe; not from an
  /// actor of the pipeline's actor system (it blocks).
  bool wait_idle(std::chrono::milliseconds timeout);

  /// Graphs submitted and not settled yet.
  uint64_t in_flight() const noexcept;

  /// Graphs settled (ready or failed) since the pipeline started.
  uint64_t finished() const noexcept;

  /// Stops intake and interrupts the compiles in flight (they settle as
  /// cancelled at their next step); waits at most `grace` for them, as
  /// wait_idle. Returns whether all settled.
  bool drain(std::chrono::milliseconds grace);

  /// Drains, then shuts the stages down. Compiles still running after
  /// `grace` are abandoned: their tasks finish on their own, against state
  /// that is never freed. Returns whether everything settled. Idempotent;
  /// thread-safe.
  bool stop(std::chrono::milliseconds grace = std::chrono::seconds(5));

private:
  struct impl;
  impl* impl_;  ///< owned; leaked instead of freed when a stop abandons work
};

} // namespace gradd::actors
