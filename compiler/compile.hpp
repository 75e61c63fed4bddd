#pragma once

// The one recipe that makes a plan from a captured node table:
// lower_to_node_ops, the pass pipeline, build_plan. The compile pipeline
// runs one step per stage (capture, pass pipeline, compile: a graph moves
// between actors), the daemon runs all three at once, and a CUDA graph's
// functional recording runs the pass pipeline alone.

#include "compiler/plan.hpp"

#include <functional>
#include <string>

namespace gradd::compiler {

/// How a graph goes through the pass pipeline.
struct pass_run {
  std::string pipeline;               ///< pass names, comma-separated ("default", ...)
  std::string dump_prefix = "graph";  ///< names its IR dumps
  std::string dump_dir;               ///< logging.ir_dump_dir; "" for none
  std::function<void()> checkpoint;   ///< called before each pass; may throw to stop
};

/// The recipe's middle step. Throws std::invalid_argument for an unknown
/// pass or one that leaves the graph broken, naming it.
void run_passes(graph& g, const pass_run& run);

/// The whole recipe on `g`, which it leaves lowered and passed.
plan compile(graph& g, const pass_run& run);

} // namespace gradd::compiler
