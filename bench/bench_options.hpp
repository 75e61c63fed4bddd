#pragma once

// gradd-bench's command line: the flags bench/gradd_bench.cpp describes,
// read and checked.

#include "gradd/settings.hpp"

#include <string>

namespace gradd::bench {

/// What gradd-bench was asked to run.
struct options {
  std::string model = "deep-mlp";
  std::string device = "cpu";
  std::string mode = "both";
  int iters = 200;
  int warmup = 20;
  std::string structures = "fixed";
  std::string shapes = "fixed";
  gradd::settings policy;
  bool grad_ready_times = false;
  bool deterministic = false;  ///< cuDNN's deterministic algorithms for the whole run
  std::string trace;  ///< --trace's file, or empty
  std::string memory_snapshot;  ///< --memory-snapshot's prefix, or empty
  bool step_times = false;  ///< each timed step's time, and each shape's floor
  bool create_graph = false;  ///< gradient-penalty steps (penalize_gradients)
};

/// The options of `argv`; prints the usage and exits 0 on --help, exits 2
/// on anything malformed.
options parse(int argc, char** argv);

} // namespace gradd::bench
