#pragma once

// What the pipeline's stages may do to the engine's plan table, and nothing
// more: the engine implements it (engine/table_sink.hpp), so actors/
// includes nothing of engine/. Graphs are named by the id the engine gave
// them when it submitted their node table. Thread-safe: the registry and
// the daemon link call it from actors, the stages' work from the TBB arena.

#include "compiler/ir.hpp"
#include "compiler/plan.hpp"

#include <chrono>
#include <cstdint>
#include <optional>

namespace gradd::actors {

class plan_sink {
public:
  using time_point = std::chrono::steady_clock::time_point;

  virtual ~plan_sink() = default;

  /// When graph `graph_id`'s compile was claimed, while the graph still
  /// waits for it; nothing once it settled or reset() dropped it.
  virtual std::optional<time_point> pending_since(uint64_t graph_id) const = 0;

  /// The graph's file name in cache.dir (compiler/portable_key.hpp).
  virtual uint64_t portable_key(uint64_t graph_id) const = 0;

  /// A compile finished: the graph's plan serves its next backwards (from
  /// the agreed index, while an agreement holds it back). Evicts plans
  /// beyond `max_plans`.
  virtual void publish(uint64_t graph_id, compiler::graph ir, compiler::plan plan,
                       double compile_ms, size_t max_plans) = 0;

  /// A compile failed: the stock engine serves the graph until `retry_at`.
  virtual void fail(uint64_t graph_id, time_point retry_at) = 0;

  /// Forgets a graph whose compile will not finish: its next backward
  /// compiles it again.
  virtual void drop(uint64_t graph_id) = 0;

  /// drop() for every graph still pending.
  virtual void drop_pending() = 0;

  /// Holds the graph's plan back until agree() (Note [Agreement across
  /// ranks]): call before it is published. Its backwards propose when to
  /// switch through pipeline::propose (the engine's side of the note), and
  /// wait for an answer they could be due at most `longest_wait`.
  virtual void hold_for_agreement(uint64_t graph_id, std::chrono::milliseconds longest_wait) = 0;

  /// The daemon took in the graph's proposal `proposal` before answering
  /// (graph_record::included); no_answer: none is on its way.
  virtual void included(uint64_t graph_id, uint64_t proposal) = 0;
  static constexpr uint64_t no_answer = UINT64_MAX;

  /// The graph's plan serves from backward `serve_from` on. False when this
  /// rank's backwards had passed that index already (it switches late).
  virtual bool agree(uint64_t graph_id, uint64_t serve_from) = 0;
};

} // namespace gradd::actors
