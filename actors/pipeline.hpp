#pragma once

// gradd's compile pipeline: the actor system, its stages and their TBB
// arena, behind an interface free of CAF and TBB.
//
//   backward (miss) --submit--> capture --> pass pipeline --> compile --> registry
//                                  (each stage's work on the TBB arena)   |
//                                                     plan table <--------+
//
// A hit never touches it: the backward's thread reads the plan table.

#include "compiler/ir.hpp"
#include "config/settings.hpp"

#include <chrono>
#include <cstdint>
#include <memory>

namespace gradd::engine::detail {
class plan_table;
}

namespace gradd::actors {

class pipeline {
public:
  /// Starts the actor system (one CAF worker: the stages only pass messages)
  /// and a TBB arena of compile.threads threads.
  pipeline(const settings& config, engine::detail::plan_table& table);

  /// Stops, as stop().
  ~pipeline();

  pipeline(const pipeline&) = delete;
  pipeline& operator=(const pipeline&) = delete;

  /// Sends the captured node table of graph `graph_id` (a pending record of
  /// the table) into the pipeline. Never blocks. Thread-safe. Returns false
  /// once the pipeline stops.
  bool submit(uint64_t graph_id, compiler::graph node_table);

  /// Waits until every submitted graph has settled, at most `timeout`.
  bool wait_idle(std::chrono::milliseconds timeout);

  /// Graphs submitted and not settled yet.
  uint64_t in_flight() const noexcept;

  /// Graphs settled (ready or failed) since the pipeline started.
  uint64_t finished() const noexcept;

  /// Stops intake, lets in-flight graphs settle (compiles finish, test
  /// delays are cut short), then shuts the actors down. Idempotent.
  void stop();

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace gradd::actors
