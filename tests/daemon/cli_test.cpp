// The gradd command line's conventions: `--help` (anywhere before a
// launch's `--`) prints how to call it and exits 0; a mistake says what is
// wrong on stderr and exits 2.

#include "child_process.hpp"

#include <catch2/catch.hpp>

#include <chrono>

using namespace std::chrono_literals;

TEST_CASE("gradd --help prints its usage and exits 0; a mistake exits 2", "[daemon]") {
  for (auto argv : std::vector<std::vector<std::string>>{{GRADD_CLI, "--help"},
                                                         {GRADD_CLI, "-h"},
                                                         {GRADD_CLI, "daemon", "--help"},
                                                         {GRADD_CLI, "status", "-h"},
                                                         {GRADD_CLI, "launch", "--help"}}) {
    auto run = gradd::test::run_child(argv, 20s);
    INFO(argv.back() << " after " << argv.size() - 2 << " words: " << run.err);
    CHECK(run.exited(0));
    CHECK_THAT(run.out, Catch::Contains("usage: gradd daemon"));
    CHECK_THAT(run.out, Catch::Contains("  launch  run N ranks"));
    CHECK(run.err.empty());
  }
  auto wrong = gradd::test::run_child({GRADD_CLI, "deamon"}, 20s);
  CHECK(wrong.exited(2));
  CHECK_THAT(wrong.err, Catch::Contains("unknown command 'deamon'"));
  CHECK_THAT(wrong.err, Catch::Contains("usage: gradd daemon"));
  CHECK(wrong.out.empty());
}
