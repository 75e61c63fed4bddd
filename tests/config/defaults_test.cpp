// The documented defaults are the code's: each default the schema, the
// README's table and the example policy write, read by the schema's own
// parser, gives the value `settings{}` holds, field by field.
//
// Each default is applied to settings whose every field is set otherwise,
// so a default that parses to another value, or into another field, shows.

#include "config/policy_files.hpp"
#include "config/schema.hpp"
#include "gradd/policy.hpp"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <type_traits>

namespace {

using gradd::settings;
using gradd::config::key_spec;
using field_map = std::map<std::string, std::string>;

template <class T>
std::string printed(const T& value) {
  if constexpr (std::is_same_v<T, bool>)
    return value ? "true" : "false";
  else if constexpr (std::is_enum_v<T>)
    return "enum " + std::to_string(static_cast<int>(value));
  else if constexpr (std::is_same_v<T, std::string>)
    return gradd::config::quoted(value);
  else
    return std::to_string(value);
}

/// Every policy field of `s`, by key path, printed. The structured bindings
/// name every member, so a member added to settings or to a section stops
/// this compiling: list it here and give it another value in odd_settings().
field_map policy_fields(const settings& s) {
  const auto& [compile, cache, fallback, nan_check, passes, cuda_graphs, daemon, logging, source] =
      s;
  (void)source;  // where the settings were loaded from: not a policy key
  const auto& [mode, threads, timeout_ms, delay_ms] = compile;
  const auto& [max_plans, cache_dir] = cache;
  const auto& [on_compile_error, retry_after_ms, on_unsupported, force_eager] = fallback;
  const auto& [enabled] = nan_check;
  const auto& [pipeline, gradient_ready] = passes;
  const auto& [graphs_enabled, graph_mode, max_graphs, dynamic_after, memory_limit_mb, hand_out,
               early_launch, max_cuts] = cuda_graphs;
  const auto& [address, token_file, daemon_timeout_ms, daemon_fallback, daemon_retry_after_ms,
               agreement_timeout_ms, max_clients, max_requests_per_client, max_nodes,
               max_message_mb] = daemon;
  const auto& [level, ir_dump_dir] = logging;
  return {
      {"compile.mode", printed(mode)},
      {"compile.threads", printed(threads)},
      {"compile.timeout_ms", printed(timeout_ms)},
      {"compile.delay_ms", printed(delay_ms)},
      {"cache.max_plans", printed(max_plans)},
      {"cache.dir", printed(cache_dir)},
      {"fallback.on_compile_error", printed(on_compile_error)},
      {"fallback.retry_after_ms", printed(retry_after_ms)},
      {"fallback.on_unsupported", printed(on_unsupported)},
      {"fallback.force_eager", printed(force_eager)},
      {"nan_check.enabled", printed(enabled)},
      {"passes.pipeline", printed(pipeline)},
      {"passes.gradient_ready", printed(gradient_ready)},
      {"cuda_graphs.enabled", printed(graphs_enabled)},
      {"cuda_graphs.mode", printed(graph_mode)},
      {"cuda_graphs.max_graphs", printed(max_graphs)},
      {"cuda_graphs.dynamic_after", printed(dynamic_after)},
      {"cuda_graphs.memory_limit_mb", printed(memory_limit_mb)},
      {"cuda_graphs.hand_out", printed(hand_out)},
      {"cuda_graphs.early_launch", printed(early_launch)},
      {"cuda_graphs.max_cuts", printed(max_cuts)},
      {"daemon.address", printed(address)},
      {"daemon.token_file", printed(token_file)},
      {"daemon.timeout_ms", printed(daemon_timeout_ms)},
      {"daemon.fallback", printed(daemon_fallback)},
      {"daemon.retry_after_ms", printed(daemon_retry_after_ms)},
      {"daemon.agreement_timeout_ms", printed(agreement_timeout_ms)},
      {"daemon.max_clients", printed(max_clients)},
      {"daemon.max_requests_per_client", printed(max_requests_per_client)},
      {"daemon.max_nodes", printed(max_nodes)},
      {"daemon.max_message_mb", printed(max_message_mb)},
      {"logging.level", printed(level)},
      {"logging.ir_dump_dir", printed(ir_dump_dir)},
  };
}

/// Settings with no field at its default.
settings odd_settings() {
  settings s;
  s.compile.mode = gradd::compile_mode::sync;
  s.compile.threads = 3;
  s.compile.timeout_ms = 500;
  s.compile.delay_ms = 7;
  s.cache.max_plans = 9;
  s.cache.dir = "/tmp/gradd-odd-cache";
  s.fallback.on_compile_error = gradd::compile_error_policy::never_retry;
  s.fallback.retry_after_ms = 5;
  s.fallback.on_unsupported = gradd::unsupported_policy::error;
  s.fallback.force_eager = true;
  s.nan_check.enabled = true;
  s.passes.pipeline = "dce";
  s.passes.gradient_ready = true;
  s.cuda_graphs.enabled = false;
  s.cuda_graphs.mode = gradd::graph_shape_policy::static_shapes;
  s.cuda_graphs.max_graphs = 3;
  s.cuda_graphs.dynamic_after = 4;
  s.cuda_graphs.memory_limit_mb = 64;
  s.cuda_graphs.hand_out = gradd::grad_hand_out::copy;
  s.cuda_graphs.early_launch = false;
  s.cuda_graphs.max_cuts = 5;
  s.daemon.address = "127.0.0.1:1";
  s.daemon.token_file = "/tmp/gradd-odd-token";
  s.daemon.timeout_ms = 11;
  s.daemon.fallback = gradd::daemon_fallback::stock;
  s.daemon.retry_after_ms = 13;
  s.daemon.agreement_timeout_ms = 19;
  s.daemon.max_clients = 2;
  s.daemon.max_requests_per_client = 3;
  s.daemon.max_nodes = 17;
  s.daemon.max_message_mb = 3;
  s.logging.level = gradd::log_level::debug;
  s.logging.ir_dump_dir = "/tmp/gradd-odd";
  s.source = "odd.yaml";
  return s;
}

/// Requires `actual` to hold `expected`'s fields, key by key.
void require_same_fields(const field_map& expected, const field_map& actual) {
  REQUIRE(expected.size() == actual.size());
  for (const auto& [path, value] : expected) {
    INFO("field " << path);
    REQUIRE(actual.count(path) == 1);
    CHECK(actual.at(path) == value);
  }
}

/// The value of the YAML scalar written as `text`, as the loader sees it
/// (`""` is the empty string).
std::string scalar_of(const std::string& text) {
  auto node = YAML::Load(text);
  REQUIRE(node.IsScalar());
  return node.Scalar();
}

/// Applies `value` to odd settings through `key`'s parser and requires
/// that it gives `key` the value of settings{} and changes no other field.
void require_parses_to_code_default(const key_spec& key, const std::string& value) {
  INFO(key.path() << ": " << gradd::config::quoted(value));
  auto s = odd_settings();
  REQUIRE(key.apply(s, value).empty());
  auto expected = policy_fields(odd_settings());
  expected.at(key.path()) = policy_fields(settings{}).at(key.path());
  require_same_fields(expected, policy_fields(s));
}

std::string source_text(const std::string& relative) {
  std::ifstream in(std::string(GRADD_SOURCE_DIR) + "/" + relative);
  REQUIRE(in);
  return {std::istreambuf_iterator<char>(in), {}};
}

/// The README's policy table: one row of cells per key, in order.
std::vector<std::vector<std::string>> readme_policy_rows() {
  std::istringstream readme(source_text("README.md"));
  std::string line;
  while (std::getline(readme, line) && line != "| key | values | default | what it does |") {
  }
  REQUIRE(readme);
  std::getline(readme, line);  // | --- | ...
  std::vector<std::vector<std::string>> rows;
  while (std::getline(readme, line) && line.rfind("| ", 0) == 0) {
    REQUIRE(line.size() > 4);
    std::vector<std::string> cells;
    auto inner = line.substr(2, line.size() - 4);  // without "| " and " |"
    for (size_t start = 0;;) {
      auto end = inner.find(" | ", start);
      cells.push_back(inner.substr(start, end - start));
      if (end == std::string::npos)
        break;
      start = end + 3;
    }
    rows.push_back(cells);
  }
  return rows;
}

/// `text` without the backticks around it.
std::string unquoted_code(const std::string& text) {
  REQUIRE(text.size() >= 2);
  REQUIRE(text.front() == '`');
  REQUIRE(text.back() == '`');
  return text.substr(1, text.size() - 2);
}

} // namespace

TEST_CASE("the policy keys are the fields of settings, and the odd settings change each",
          "[config][defaults]") {
  auto fields = policy_fields(settings{});
  REQUIRE(fields.size() == gradd::config::schema().size());
  for (const auto& key : gradd::config::schema())
    CHECK(fields.count(key.path()) == 1);
  auto odd = policy_fields(odd_settings());
  for (const auto& [path, value] : fields) {
    INFO(path);
    CHECK(odd.at(path) != value);
  }
}

TEST_CASE("each schema default parses to the value settings{} holds", "[config][defaults]") {
  for (const auto& key : gradd::config::schema())
    require_parses_to_code_default(key, scalar_of(key.default_value));
}

TEST_CASE("the README table documents every key with the code's default", "[config][defaults]") {
  auto rows = readme_policy_rows();
  const auto& keys = gradd::config::schema();
  REQUIRE(rows.size() == keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    INFO("README row " << i);
    REQUIRE(rows[i].size() == 4);
    CHECK(rows[i][0] == "`" + keys[i].path() + "`");
    CHECK(rows[i][1] == keys[i].type);
    CHECK(rows[i][3] == keys[i].doc);
    require_parses_to_code_default(keys[i], scalar_of(unquoted_code(rows[i][2])));
  }
}

TEST_CASE("the example policy writes every key with the code's default", "[config][defaults]") {
  auto path = std::string(GRADD_SOURCE_DIR) + "/config/gradd.example.yaml";
  require_same_fields(policy_fields(settings{}), policy_fields(gradd::load_settings(path)));
  // A key left out would keep its default above, so each must be written.
  auto example = YAML::LoadFile(path);
  for (const auto& key : gradd::config::schema()) {
    auto value = example[key.section][key.name];
    INFO(key.path());
    REQUIRE(value.IsScalar());
    require_parses_to_code_default(key, value.Scalar());
  }
}

TEST_CASE("an empty policy keeps every default", "[config][defaults]") {
  for (const auto* text : {"", "# only a comment\n", "compile:\n  # mode: sync\n"}) {
    INFO(text);
    require_same_fields(policy_fields(settings{}),
                        policy_fields(gradd::load_settings(gradd::test::policy_file(text))));
  }
}
