// gradd-bench's command line, run as a child process: usage, refusals and
// policies, each with its exit code and message, within a time bound.

#include "bench/run_bench.hpp"
#include "config/policy_files.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

using gradd::test::run_bench;

TEST_CASE("gradd-bench refuses a bad command line with exit code 2 and says why",
          "[bench][cli]") {
  struct refused {
    std::vector<std::string> args;
    const char* says;
  };
  auto policy = gradd::test::policy_file("compile:\n  mode: sync\n");
  const refused cases[] = {
      {{"--bogus"}, "gradd-bench: unknown option '--bogus'\n"},
      {{"--bogus=3"}, "unknown option '--bogus'"},
      {{"-x"}, "unknown option '-x'"},
      {{"mlp"}, "unexpected argument 'mlp'"},
      {{"--iters"}, "--iters needs a value"},
      {{"--iters="}, "--iters needs a value"},
      {{"--iters", "--warmup", "3"}, "--iters needs a value"},
      {{"--iters", "abc"}, "--iters wants an integer >= 1, got 'abc'"},
      {{"--iters=0"}, "--iters wants an integer >= 1, got '0'"},
      {{"--warmup", "99999999999"}, "--warmup wants an integer >= 0, got '99999999999'"},
      {{"--iters", "3", "--iters=4"}, "--iters given twice"},
      {{"--grad-ready-times", "--grad-ready-times"}, "--grad-ready-times given twice"},
      {{"--grad-ready-times=yes"}, "--grad-ready-times takes no value"},
      {{"--deterministic=yes"}, "--deterministic takes no value"},
      {{"--deterministic", "--deterministic"}, "--deterministic given twice"},
      {{"--step-times=yes"}, "--step-times takes no value"},
      {{"--model=resnet"}, "--model 'resnet' is not one of: "},
      {{"--config", policy, "--config", policy}, "--config given twice"},
  };
  for (const auto& c : cases) {
    INFO("gradd-bench " << Catch::Detail::stringify(c.args));
    auto r = run_bench(c.args);
    INFO(r.err);
    CHECK(r.exited(2));
    CHECK_THAT(r.err, Catch::Contains(c.says));
    CHECK_THAT(r.err, Catch::Contains("usage: gradd-bench"));
    CHECK(r.out.empty());
  }
}

TEST_CASE("gradd-bench --help and -h print the usage and exit 0", "[bench][cli]") {
  for (const char* flag : {"--help", "-h"}) {
    INFO(flag);
    auto r = run_bench({"--iters", "5", flag, "--bogus"});
    CHECK(r.exited(0));
    CHECK_THAT(r.out, Catch::StartsWith("usage: gradd-bench"));
    CHECK_THAT(r.out, Catch::Contains("--iters=50"));
    CHECK(r.err.empty());
  }
}

TEST_CASE("gradd-bench reports a bad policy, from --config or GRADD_CONFIG, with exit code 2",
          "[bench][cli]") {
  auto folder = gradd::test::scratch_folder();
  auto fifo = (folder / "policy.fifo").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto bad = gradd::test::policy_file("compile:\n  mode: fast\n");
  struct refused {
    std::vector<std::string> args;
    std::vector<std::string> env;
    std::string says;
  };
  const refused cases[] = {
      {{"--config", "/no/such/policy.yaml"}, {},
       "gradd: /no/such/policy.yaml: cannot open the file: No such file or directory\n"},
      {{"--config", folder.string()}, {}, "is a directory, not a regular file"},
      {{"--config=" + fifo}, {}, "is a FIFO (named pipe), not a regular file"},
      {{"--config", "/proc/self/mem"}, {}, "cannot read the file: Input/output error"},
      {{"--config", bad}, {}, bad + ":2: key 'compile.mode': expected one of async, sync"},
      {{}, {"GRADD_CONFIG=/no/such/policy.yaml"},
       "cannot open the file: No such file or directory (the policy GRADD_CONFIG names)"},
      {{}, {"GRADD_CONFIG=" + folder.string()}, "is a directory, not a regular file"},
      {{}, {"GRADD_CONFIG=" + bad}, bad + ":2: key 'compile.mode'"},
  };
  for (const auto& c : cases) {
    INFO("gradd-bench " << Catch::Detail::stringify(c.args) << " with "
                        << Catch::Detail::stringify(c.env));
    auto r = run_bench(c.args, c.env, std::chrono::seconds(60));
    INFO(r.err);
    CHECK(r.exited(2));
    CHECK_THAT(r.err, Catch::Contains(c.says));
    CHECK(r.out.empty());
  }
}

TEST_CASE("with --config, gradd-bench does not read GRADD_CONFIG", "[bench][cli]") {
  auto good = gradd::test::policy_file("compile:\n  mode: sync\n");
  auto r = run_bench({"--config=" + good, "--model=mlp", "--mode", "gradd", "--iters=2",
                      "--warmup=0"},
                     {"GRADD_CONFIG=/no/such/policy.yaml"});
  INFO(r.err);
  CHECK(r.exited(0));
  CHECK_THAT(r.out, Catch::StartsWith(
                        "{\"model\": \"mlp\", \"device\": \"cpu\", \"mode\": \"gradd\""));
  // sync mode: the plan serves every timed backward
  CHECK_THAT(r.out, Catch::Contains("\"plan_backwards\": 2"));
}

TEST_CASE("gradd-bench --deterministic says so in its line", "[bench][cli]") {
  std::vector<std::string> args{"--model=mlp", "--mode", "both", "--iters=2", "--warmup=0"};
  auto plain = run_bench(args);
  args.push_back("--deterministic");
  auto deterministic = run_bench(args);
  INFO(plain.err << deterministic.err);
  CHECK(plain.exited(0));
  CHECK(deterministic.exited(0));
  CHECK_THAT(plain.out, Catch::Contains("\"deterministic\": false"));
  CHECK_THAT(deterministic.out, Catch::Contains("\"deterministic\": true"));
  CHECK_THAT(deterministic.out, Catch::Contains("\"max_rel_grad_diff\": 0,"));
}

TEST_CASE("gradd-bench --create-graph times gradient-penalty steps on plans", "[bench][cli]") {
  auto policy = gradd::test::policy_file("compile:\n  mode: sync\n");
  auto r = run_bench({"--config=" + policy, "--model=mlp", "--mode", "both", "--iters=2",
                      "--warmup=0", "--create-graph"});
  INFO(r.err);
  CHECK(r.exited(0));
  CHECK_THAT(r.out, Catch::Contains("\"create_graph\": true"));
  // Both backwards of each timed step, gradients equal to the stock engine's.
  CHECK_THAT(r.out, Catch::Contains("\"plan_backwards\": 4"));
  CHECK_THAT(r.out, Catch::Contains("\"eager_backwards\": 0,"));
  CHECK_THAT(r.out, Catch::Contains("\"max_rel_grad_diff\": 0,"));
}

TEST_CASE("gradd-bench's stock working set holds at least its stock backward's peak",
          "[bench][cli]") {
  // Kept to the backward's end, no saved tensor gives its memory to a gradient.
  auto r = run_bench({"--model=convnet", "--mode", "both", "--iters=2", "--warmup=0"});
  INFO(r.err << r.out);
  REQUIRE(r.exited(0));
  auto megabytes = [&](const std::string& key) {
    std::smatch m;
    REQUIRE(std::regex_search(r.out, m, std::regex("\"" + key + "\": ([0-9.]+)")));
    return std::stod(m[1]);
  };
  auto peak = megabytes("eager_peak_mb");
  auto working_set = megabytes("eager_working_set_mb");
  CHECK(peak > 0);
  CHECK(working_set > peak);
}

TEST_CASE("gradd-bench --step-times lists each timed step in order", "[bench][cli]") {
  auto r = run_bench({"--model=mlp", "--mode", "gradd", "--iters=3", "--warmup=0", "--shapes",
                      "sweep", "--step-times"});
  INFO(r.err);
  CHECK(r.exited(0));
  CHECK_THAT(r.out, Catch::Matches(R"(.*"step_ms": \[[0-9.]+, [0-9.]+, [0-9.]+\].*\s*)"));
  auto plain = run_bench({"--model=mlp", "--mode", "gradd", "--iters=3", "--warmup=0"});
  CHECK(plain.exited(0));
  CHECK_THAT(plain.out, !Catch::Contains("step_ms"));
}

TEST_CASE("gradd-bench --trace writes a kernel trace, and says so where it cannot", "[bench][cli]") {
  auto folder = gradd::test::scratch_folder();
  auto trace = (folder / "trace.json").string();
  auto r = run_bench({"--model=mlp", "--mode", "both", "--iters=2", "--warmup=1", "--trace", trace});
  INFO(r.err);
  CHECK(r.exited(0));
  CHECK_THAT(r.out, Catch::StartsWith("{\"model\": \"mlp\""));
  std::ifstream written(trace);
  std::string text((std::istreambuf_iterator<char>(written)), std::istreambuf_iterator<char>());
  CHECK_THAT(text, Catch::Contains("\"traceEvents\""));

  auto unwritable = run_bench({"--model=mlp", "--iters=2", "--warmup=0", "--trace",
                               (folder / "no" / "such" / "trace.json").string()});
  CHECK(unwritable.exited(1));
  CHECK_THAT(unwritable.err, Catch::Contains("gradd-bench: cannot write the kernel trace to "));
  CHECK(unwritable.out.empty());
}
