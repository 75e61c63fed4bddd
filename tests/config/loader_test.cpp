// Policy files: every key, good and bad values, and what an error names.
// The defaults are held to settings{} in defaults_test.cpp.

#include "config/policy_files.hpp"
#include "gradd/policy.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>

using gradd::test::policy_file;

TEST_CASE("every key takes a good value", "[config]") {
  auto s = gradd::load_settings(policy_file(R"(
compile:
  mode: sync
  threads: 3
  timeout_ms: 500
  delay_ms: 7
cache:
  max_plans: 9
fallback:
  on_compile_error: never_retry
  retry_after_ms: 5
  on_unsupported: error
  force_eager: true
nan_check:
  enabled: true
passes:
  pipeline: dce,remove_unused_sizes
  gradient_ready: true
cuda_graphs:
  enabled: false
  mode: static
  max_graphs: 3
  dynamic_after: 4
  memory_limit_mb: 64
  hand_out: copy
  early_launch: false
logging:
  level: debug
  ir_dump_dir: /tmp/gradd-ir
)"));
  CHECK(s.compile.mode == gradd::compile_mode::sync);
  CHECK(s.compile.threads == 3);
  CHECK(s.compile.timeout_ms == 500);
  CHECK(s.compile.delay_ms == 7);
  CHECK(s.cache.max_plans == 9);
  CHECK(s.fallback.on_compile_error == gradd::compile_error_policy::never_retry);
  CHECK(s.fallback.retry_after_ms == 5);
  CHECK(s.fallback.on_unsupported == gradd::unsupported_policy::error);
  CHECK(s.fallback.force_eager);
  CHECK(s.nan_check.enabled);
  CHECK(s.passes.pipeline == "dce,remove_unused_sizes");
  CHECK(s.passes.gradient_ready);
  CHECK_FALSE(s.cuda_graphs.enabled);
  CHECK(s.cuda_graphs.mode == gradd::graph_shape_policy::static_shapes);
  CHECK(s.cuda_graphs.max_graphs == 3);
  CHECK(s.cuda_graphs.dynamic_after == 4);
  CHECK(s.cuda_graphs.memory_limit_mb == 64);
  CHECK(s.cuda_graphs.hand_out == gradd::grad_hand_out::copy);
  CHECK_FALSE(s.cuda_graphs.early_launch);
  CHECK(s.logging.level == gradd::log_level::debug);
  CHECK(s.logging.ir_dump_dir == "/tmp/gradd-ir");
}

TEST_CASE("a bad policy names file, line and key", "[config]") {
  struct bad_case {
    const char* text;
    int line;
    const char* key;
    const char* says;
  };
  const bad_case cases[] = {
      {"compile:\n  mode: fast\n", 2, "compile.mode", "expected one of async, sync, got 'fast'"},
      {"compile:\n  threads: 0\n", 2, "compile.threads", "expected an integer in [1, 64]"},
      {"compile:\n  threads: two\n", 2, "compile.threads", "got 'two'"},
      {"compile:\n  timeout_ms: -3\n", 2, "compile.timeout_ms", "got '-3'"},
      {"compile:\n  delay_ms: 1.5\n", 2, "compile.delay_ms", "got '1.5'"},
      {"cache:\n  max_plans: 0\n", 2, "cache.max_plans", "expected an integer"},
      {"fallback:\n  on_compile_error: later\n", 2, "fallback.on_compile_error",
       "retry_after, never_retry"},
      {"fallback:\n  retry_after_ms: soon\n", 2, "fallback.retry_after_ms", "got 'soon'"},
      {"fallback:\n  on_unsupported: ignore\n", 2, "fallback.on_unsupported", "eager, error"},
      {"fallback:\n  force_eager: yes\n", 2, "fallback.force_eager", "expected true or false"},
      {"nan_check:\n  enabled: 1\n", 2, "nan_check.enabled", "expected true or false"},
      {"passes:\n  pipeline: dce,fuse_all\n", 2, "passes.pipeline",
       "unknown pass 'fuse_all' (known: delay_unpack_hook_nodes"},
      {"passes:\n  pipeline: \",,\"\n", 2, "passes.pipeline",
       "expected pass names separated by single commas, got ',,' (name 1 is empty)"},
      {"passes:\n  pipeline: dce,,\n", 2, "passes.pipeline", "got 'dce,,' (name 2 is empty)"},
      {"passes:\n  pipeline: \",dce\"\n", 2, "passes.pipeline", "got ',dce' (name 1 is empty)"},
      {"passes:\n  pipeline: \" , \"\n", 2, "passes.pipeline", "(name 1 is empty)"},
      {"passes:\n  pipeline: dce,remove_unused_sizes,\n", 2, "passes.pipeline",
       "(name 3 is empty)"},
      {"passes:\n  pipeline: \"dce, ,remove_unused_sizes\"\n", 2, "passes.pipeline",
       "(name 2 is empty)"},
      {"passes:\n  gradient_ready: maybe\n", 2, "passes.gradient_ready", "expected true or false"},
      {"cuda_graphs:\n  enabled: on\n", 2, "cuda_graphs.enabled", "expected true or false"},
      {"cuda_graphs:\n  mode: sometimes\n", 2, "cuda_graphs.mode",
       "expected one of static, auto, dynamic, got 'sometimes'"},
      {"cuda_graphs:\n  max_graphs: 0\n", 2, "cuda_graphs.max_graphs",
       "expected an integer in [1, 1024], got '0'"},
      {"cuda_graphs:\n  mode: auto\n  max_graphs: 1025\n", 3, "cuda_graphs.max_graphs",
       "got '1025'"},
      {"cuda_graphs:\n  dynamic_after: 0\n", 2, "cuda_graphs.dynamic_after",
       "expected an integer in [1, 4294967295], got '0'"},
      {"cuda_graphs:\n  memory_limit_mb: 4G\n", 2, "cuda_graphs.memory_limit_mb", "got '4G'"},
      {"cuda_graphs:\n  hand_out: lend\n", 2, "cuda_graphs.hand_out",
       "expected one of borrow, copy, got 'lend'"},
      {"cuda_graphs:\n  enabled: true\n  replay: always\n", 3, "cuda_graphs.replay",
       "unknown key (known in cuda_graphs: enabled, mode, max_graphs, dynamic_after, "
       "memory_limit_mb, hand_out, early_launch, max_cuts)"},
      {"logging:\n  level: loud\n", 2, "logging.level", "error, warning, info, debug"},
      {"logging:\n  ir_dump_dir: [a, b]\n", 2, "logging.ir_dump_dir", "got a sequence"},
      {"compile:\n  mode: sync\n  speed: 3\n", 3, "compile.speed",
       "unknown key (known in compile: mode, threads"},
      {"# comment\ncuda:\n  graphs: true\n", 2, "cuda", "unknown section"},
      {"compile: 3\n", 1, "compile", "expected a map of keys"},
  };
  for (const auto& c : cases) {
    auto path = policy_file(c.text);
    INFO(c.text);
    try {
      gradd::load_settings(path);
      FAIL("no error");
    } catch (const gradd::config_error& e) {
      CHECK(e.file() == path);
      CHECK(e.line() == c.line);
      CHECK(e.key() == c.key);
      CHECK_THAT(e.what(), Catch::Contains(c.says));
      CHECK_THAT(e.what(), Catch::Contains(path + ":" + std::to_string(c.line)));
    }
  }
}

TEST_CASE("a pipeline takes pass names, default among them, or none", "[config]") {
  // The near misses of the blank names refused above.
  for (const char* names : {"default", "dce", "dce,remove_unused_sizes", "default,dce", ""}) {
    INFO(names);
    auto s = gradd::load_settings(policy_file("passes:\n  pipeline: \"" + std::string(names)
                                              + "\"\n"));
    CHECK(s.passes.pipeline == names);
  }
}

TEST_CASE("a missing file and broken YAML are errors naming the file", "[config]") {
  CHECK_THROWS_WITH(gradd::load_settings("/no/such/policy.yaml"),
                    "gradd: /no/such/policy.yaml: cannot open the file: No such file or directory");
  auto path = policy_file("compile:\n  mode: sync\n  threads: 2: 3\n");
  try {
    gradd::load_settings(path);
    FAIL("no error");
  } catch (const gradd::config_error& e) {
    CHECK(e.line() == 3);
    CHECK_THAT(e.what(), Catch::Contains("not valid YAML (column 13): illegal map value"));
  }
}

TEST_CASE("settings remember the policy file they came from", "[config]") {
  auto path = policy_file("cache:\n  max_plans: 3\n");
  CHECK(gradd::load_settings(path).source == path);
  CHECK(gradd::settings{}.source.empty());
}

TEST_CASE("an error's what() is file, line, key and reason", "[config]") {
  gradd::config_error e("p.yaml", 4, "cache.max_plans", "too many");
  CHECK(std::string(e.what()) == "gradd: p.yaml:4: key 'cache.max_plans': too many");
  CHECK(e.reason() == "too many");
  CHECK(std::string(gradd::config_error("p.yaml", 0, "", "gone").what()) == "gradd: p.yaml: gone");
}

TEST_CASE("GRADD_CONFIG names the default policy", "[config]") {
  auto path = policy_file("cache:\n  max_plans: 3\n");
  ::setenv("GRADD_CONFIG", path.c_str(), 1);
  auto s = gradd::default_settings();
  ::unsetenv("GRADD_CONFIG");
  CHECK(s.cache.max_plans == 3);
  CHECK(s.source == path);
  CHECK(gradd::default_settings().cache.max_plans == 256);
}

TEST_CASE("a bad GRADD_CONFIG policy says where it was named", "[config]") {
  auto path = policy_file("cache:\n  max_plans: none\n");
  ::setenv("GRADD_CONFIG", path.c_str(), 1);
  try {
    gradd::default_settings();
    FAIL("no error");
  } catch (const gradd::config_error& e) {
    CHECK(e.file() == path);
    CHECK(e.line() == 2);
    CHECK(e.key() == "cache.max_plans");
    CHECK_THAT(e.what(), Catch::EndsWith("got 'none' (the policy GRADD_CONFIG names)"));
  }
  ::unsetenv("GRADD_CONFIG");
}
