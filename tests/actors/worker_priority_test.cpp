// compile.nice: the TBB workers that compile run that many nice steps below
// the training thread, seen from /proc in a fresh child process (a worker
// keeps its priority, so a process that compiled before would hide it).

#include "child_process.hpp"

#include <catch2/catch.hpp>

#include <regex>
#include <string>

namespace {

struct nice_values {
  int main = 0;
  int highest = 0;
};

/// Runs the child's compile_worker_priority scenario under compile.nice =
/// `increment`.
nice_values after_a_compile(int increment) {
  auto child = gradd::test::run_child({GRADD_LIFECYCLE_CHILD, "compile_worker_priority"},
                                      std::chrono::seconds(20),
                                      {"GRADD_TEST_NICE=" + std::to_string(increment)});
  INFO("output: " << child.out << child.err);
  REQUIRE(child.exited(0));
  std::smatch found;
  REQUIRE(std::regex_search(child.out, found, std::regex("main=(-?\\d+) highest=(-?\\d+)")));
  return {std::stoi(found[1]), std::stoi(found[2])};
}

} // namespace

TEST_CASE("compile workers run compile.nice steps below the training thread",
          "[actors][lifecycle]") {
  auto lowered = after_a_compile(10);
  CHECK(lowered.highest == std::min(lowered.main + 10, 19));
  auto as_they_are = after_a_compile(0);
  CHECK(as_they_are.highest == as_they_are.main);
}
