#pragma once

// gradd-bench, the one just built, run as a child process.

#include "child_process.hpp"

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

namespace gradd::test {

/// Runs gradd-bench with `args`, in this environment without GRADD_CONFIG
/// and with `env` added, for at most `bound`. GRADD_TEST_BENCH names
/// another gradd-bench than the one built beside these tests (binaries
/// built here and run on the GPU machine: scripts/gpu_prebuilt.sh).
inline child_result run_bench(std::vector<std::string> args, std::vector<std::string> env = {},
                              std::chrono::seconds bound = std::chrono::seconds(120)) {
  const char* other = std::getenv("GRADD_TEST_BENCH");
  args.insert(args.begin(), other && *other ? other : GRADD_BENCH_PATH);
  env.insert(env.begin(), "GRADD_CONFIG");
  return run_child(args, bound, env);
}

} // namespace gradd::test
