#pragma once

// Hostile policy texts, each with the config_error it must raise: the line
// and key it names and a fragment of its message. Shared by the loader's
// table test and the one through gradd::enable.

#include <string>
#include <vector>

namespace gradd::test {

struct hostile_policy {
  const char* kind;  ///< what is wrong, for the test log
  std::string text;
  int line;
  const char* key;
  const char* says;
};

inline std::string nested(char open, char close, size_t depth) {
  return std::string(depth, open) + std::string(depth, close);
}

inline const std::vector<hostile_policy>& hostile_policies() {
  using namespace std::string_literals;
  static const std::vector<hostile_policy> table{
      // syntax
      {"unclosed flow sequence (its shape is refused first)", "compile:\n  mode: [sync\n", 2,
       "compile.mode", "got a sequence"},
      {"unclosed flow map", "compile: {mode: sync\n", 2, "", "not valid YAML"},
      {"unclosed quote (yaml-cpp reads to the end)", "compile:\n  mode: \"sync\n", 2,
       "compile.mode", "got 'sync '"},
      {"key without colon", "compile:\n  mode: sync\n  threads 2\n", 3, "compile.threads 2",
       "unknown key"},
      {"two colons", "compile: mode: sync\n", 1, "compile",
       "expected a map of keys, got the scalar 'mode'"},
      {"indentation out of step", "compile:\n  mode: sync\n   threads: 2\n", 2,
       "compile.mode", "got 'sync threads'"},
      {"two colons in a section", "compile:\n  mode: sync: async\n", 2, "", "not valid YAML"},
      {"tab indentation", "compile:\n\tmode: sync\n", 2, "", "indented with a tab"},
      {"repeated YAML directive", "%YAML 1.2\n%YAML 1.2\n---\ncompile: {}\n", 2, "",
       "repeated YAML directive"},
      {"alias of no anchor", "compile:\n  mode: *fast\n", 2, "", "not valid YAML"},
      // structure
      {"a sequence at the top", "- compile\n- cache\n", 1, "",
       "a policy is a map of sections, got a sequence"},
      {"a scalar at the top", "just some text\n", 1, "",
       "a policy is a map of sections, got the scalar 'just some text'"},
      {"section given twice",
       "compile:\n  mode: sync\ncache:\n  max_plans: 2\ncompile:\n  threads: 2\n", 5,
       "compile", "given twice, at lines 1 and 5"},
      {"key given twice", "compile:\n  mode: sync\n  threads: 2\n  mode: async\n", 4,
       "compile.mode", "given twice, at lines 2 and 4"},
      {"key given twice in a flow map", "compile: {mode: sync, mode: async}\n", 1,
       "compile.mode", "given twice"},
      {"a second document", "compile:\n  mode: sync\n---\ncache:\n  max_plans: 3\n", 3, "",
       "a second YAML document"},
      {"an empty second document", "compile:\n  mode: sync\n---\n", 3, "",
       "a second YAML document"},
      {"a document after an end marker", "cache:\n  max_plans: 3\n...\ncompile: {}\n", 4, "",
       "a second YAML document"},
      {"complex key at the top", "? [compile, cache]\n: {mode: sync}\n", 1, "",
       "a key must be a plain name, got a sequence"},
      {"complex key in a section", "compile:\n  ? {mode: 1}\n  : sync\n", 2, "compile",
       "a key must be a plain name, got a map"},
      {"key without a name", "compile:\n  : sync\n", 2, "compile", "a key without a name"},
      {"section is a sequence", "compile:\n  - mode\n  - sync\n", 2, "compile",
       "expected a map of keys, got a sequence"},
      {"section is a scalar", "compile: sync\n", 1, "compile",
       "expected a map of keys, got the scalar 'sync'"},
      {"value is a map", "compile:\n  mode:\n    fast: true\n", 3, "compile.mode",
       "expected a plain value (async, sync), got a map"},
      {"value is a sequence", "compile:\n  threads: [1, 2]\n", 2, "compile.threads",
       "expected a plain value (integer 1..64), got a sequence"},
      {"path is a sequence", "logging:\n  ir_dump_dir: [a, b]\n", 2, "logging.ir_dump_dir",
       "expected a plain value (path), got a sequence"},
      {"empty value", "compile:\n  mode:\ncache:\n  max_plans: 2\n", 2, "compile.mode",
       "has no value; expected async, sync"},
      {"null value", "logging:\n  ir_dump_dir: ~\n", 2, "logging.ir_dump_dir", "has no value"},
      {"nested 10000 deep in a value", "compile:\n  mode: " + nested('[', ']', 10000) + "\n", 2,
       "compile.mode", "got a sequence"},
      {"nested 100000 deep at the top", nested('[', ']', 100000) + "\n", 1, "",
       "a policy is a map of sections, got a sequence"},
      {"a map 100000 deep in a section", "compile: " + nested('{', '}', 100000) + "\n", 1,
       "compile", "a key without a name"},
      {"unknown section", "# comment\ncuda:\n  graphs: true\n", 2, "cuda",
       "unknown section (known: compile, cache, fallback"},
      {"section named in the singular", "cuda_graph:\n  enabled: true\n", 1, "cuda_graph",
       "unknown section (known: compile, cache, fallback, nan_check, passes, cuda_graphs, "
       "daemon, logging)"},
      {"a daemon address without a port", "daemon:\n  address: localhost\n", 2, "daemon.address",
       "expected host:port with a port in [0, 65535], got 'localhost'"},
      {"a daemon port out of range", "daemon:\n  address: 127.0.0.1:70000\n", 2,
       "daemon.address", "expected host:port"},
      {"section in the wrong case", "Compile:\n  mode: sync\n", 1, "Compile", "unknown section"},
      {"numeric section", "1: 2\n", 1, "1", "unknown section"},
      {"unknown key", "compile:\n  mode: sync\n  speed: 3\n", 3, "compile.speed",
       "unknown key (known in compile: mode, threads"},
      // YAML features a policy does not use
      {"anchor", "compile: &base\n  mode: sync\n", 1, "compile", "an anchor (&base)"},
      {"anchor on a value", "compile:\n  mode: &m sync\n", 2, "compile.mode", "an anchor (&m)"},
      {"merge key in a section", "compile:\n  <<: {mode: sync}\n", 2, "compile",
       "a merge key (<<)"},
      {"merge key at the top", "<<: {compile: {mode: sync}}\n", 1, "", "a merge key (<<)"},
      {"core tag", "compile:\n  mode: !!str sync\n", 2, "compile.mode", "the tag !!str"},
      {"local tag", "compile:\n  threads: !int 3\n", 2, "compile.threads", "the tag !int"},
      {"tag on a section", "compile: !!map {mode: sync}\n", 1, "compile", "the tag !!map"},
      // types and ranges
      {"integer too small", "compile:\n  threads: 0\n", 2, "compile.threads",
       "expected an integer in [1, 64], got '0'"},
      {"integer too big", "compile:\n  threads: 65\n", 2, "compile.threads", "got '65'"},
      {"graphs per structure too many", "cuda_graphs:\n  max_graphs: 1025\n", 2,
       "cuda_graphs.max_graphs", "expected an integer in [1, 1024], got '1025'"},
      {"unit on an integer", "cuda_graphs:\n  memory_limit_mb: 512MB\n", 2,
       "cuda_graphs.memory_limit_mb", "got '512MB'"},
      {"negative integer", "compile:\n  delay_ms: -1\n", 2, "compile.delay_ms", "got '-1'"},
      {"2^32", "compile:\n  timeout_ms: 4294967296\n", 2, "compile.timeout_ms",
       "expected an integer in [1, 4294967295], got '4294967296'"},
      {"huge integer", "fallback:\n  retry_after_ms: 99999999999999999999999999\n", 2,
       "fallback.retry_after_ms", "got '99999999999999999999999999'"},
      {"float for an integer", "cache:\n  max_plans: 1.0\n", 2, "cache.max_plans", "got '1.0'"},
      {"exponent for an integer", "cache:\n  max_plans: 1e3\n", 2, "cache.max_plans",
       "got '1e3'"},
      {"hex for an integer", "cache:\n  max_plans: 0x10\n", 2, "cache.max_plans", "got '0x10'"},
      {"plus sign", "cache:\n  max_plans: +5\n", 2, "cache.max_plans", "got '+5'"},
      {"underscore digits", "cache:\n  max_plans: 1_000\n", 2, "cache.max_plans",
       "got '1_000'"},
      {"empty quoted integer", "compile:\n  threads: \"\"\n", 2, "compile.threads", "got ''"},
      {"word for an integer", "fallback:\n  retry_after_ms: soon\n", 2,
       "fallback.retry_after_ms", "got 'soon'"},
      {"yes for a boolean", "fallback:\n  force_eager: yes\n", 2, "fallback.force_eager",
       "expected true or false, got 'yes'"},
      {"on for a boolean", "nan_check:\n  enabled: on\n", 2, "nan_check.enabled", "got 'on'"},
      {"True for a boolean", "passes:\n  gradient_ready: True\n", 2, "passes.gradient_ready",
       "got 'True'"},
      {"off for a boolean", "cuda_graphs:\n  enabled: off\n", 2, "cuda_graphs.enabled",
       "expected true or false, got 'off'"},
      {"1 for a boolean", "nan_check:\n  enabled: 1\n", 2, "nan_check.enabled", "got '1'"},
      {"choice in capitals", "compile:\n  mode: SYNC\n", 2, "compile.mode",
       "expected one of async, sync, got 'SYNC'"},
      {"choice spelled as its enum", "cuda_graphs:\n  mode: static_shapes\n", 2,
       "cuda_graphs.mode", "expected one of static, auto, dynamic, got 'static_shapes'"},
      {"choice with a trailing space", "logging:\n  level: \"info \"\n", 2, "logging.level",
       "got 'info '"},
      {"choice as a block scalar", "compile:\n  mode: |\n    sync\n", 2, "compile.mode",
       "got 'sync\\n'"},
      {"a 5000-byte value", "compile:\n  mode: " + std::string(5000, 'x') + "\n", 2,
       "compile.mode", "... (5000 bytes)"},
      {"unknown pass", "passes:\n  pipeline: dce,fuse_all\n", 2, "passes.pipeline",
       "unknown pass 'fuse_all'"},
      // encodings
      {"NUL byte", "compile:\n  mode: sy\0nc\n"s, 2, "", "a NUL byte"},
      {"UTF-16 without a byte order mark", "c\0o\0m\0p\0i\0l\0e\0:\0\n\0"s, 1, "", "a NUL byte"},
      {"UTF-16 LE with a byte order mark", "\xFF\xFE" "c\0:\0\n\0"s, 1, "", "is UTF-16"},
      {"UTF-16 BE with a byte order mark", "\xFE\xFF\0c\0:\0\n"s, 1, "", "is UTF-16"},
      {"Latin-1 byte", "compile:\n  mode: caf\xE9\n", 2, "",
       "a bad byte sequence starting with 0xE9"},
      {"overlong UTF-8", "cache:\n  max_plans: 1\n# \xC0\xAF\n", 3, "", "starting with 0xC0"},
      {"UTF-8 surrogate", "# \xED\xA0\x80\n", 1, "", "starting with 0xED"},
      {"truncated UTF-8 at the end", "compile:\n  mode: \xE2\x82", 2, "", "starting with 0xE2"},
      {"bell character", "compile:\n  mode: sy\x07nc\n", 2, "", "control character U+0007"},
      {"escape character", "# \x1B[31m red\n", 1, "", "control character U+001B"},
      {"DEL character", "compile:\n  mode: sync\x7F\n", 2, "", "control character U+007F"},
      {"C1 control character", "compile:\n  mode: \xC2\x9Bsync\n", 2, "",
       "control character U+009B"},
  };
  return table;
}

} // namespace gradd::test
