#pragma once

// What each pipeline stage is spawned with and keeps as its own: the policy,
// the plan sink its results go to, where its heavy work runs, and the
// pipeline's stop flag, which only the pipeline sets. Nothing else is
// shared between stages: jobs and results travel as messages, and the
// registry alone counts them.

#include "actors/errors.hpp"
#include "actors/messages.hpp"
#include "actors/plan_sink.hpp"
#include "gradd/settings.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

namespace gradd::actors {

/// Runs a stage's heavy work: on the pipeline's TBB arena, or inline where
/// a test drives the stages on CAF's test coordinator. The work does not
/// throw: a stage turns its errors into a failed compile_result.
using work_runner = std::function<void(std::function<void()>)>;

/// Thrown by stage_setup::check_interruption.
struct interrupted : std::runtime_error {
  interrupted(errc code, const std::string& why) : std::runtime_error(why), code(code) {}
  errc code;
};

struct stage_setup {
  settings config;
  plan_sink* sink = nullptr;
  work_runner run_work;
  /// Set when the pipeline stops: no new work; work in flight is cut short.
  const std::atomic<bool>* stopping = nullptr;

  bool is_stopping() const { return stopping->load(); }

  /// Why graph `graph_id`'s compile should stop now, if it should: the
  /// pipeline stops or reset() dropped the graph (cancelled), or
  /// compile.timeout_ms has passed since the claim (timed_out). Stages ask
  /// between their steps, so a compile never runs on long after nobody
  /// wants it.
  std::optional<caf::error> interruption(uint64_t graph_id) const;

  /// Throws `interrupted` naming the interruption, if there is one.
  void check_interruption(uint64_t graph_id) const;

  /// The failed result a stage sends the registry when its work for graph
  /// `graph_id` threw: an interruption as it is, anything else as
  /// compile_failed naming `stage`. Call from a catch block.
  static compile_result failure(uint64_t graph_id, const std::string& stage);
};

} // namespace gradd::actors
