// The policy schema table and the parsers of its value types.

#include "config/schema.hpp"

#include "compiler/pass_manager.hpp"

#include <yaml-cpp/yaml.h>

#include <limits>

namespace gradd::config {

namespace {

using apply_fn = std::function<std::string(settings&, const YAML::Node&)>;

std::string scalar_of(const YAML::Node& value) {
  return value.IsScalar() ? value.Scalar() : std::string();
}

/// An unsigned integer in [minimum, maximum], stored through `field`.
template <class Field>
apply_fn integer(Field field, uint32_t minimum,
                 uint32_t maximum = std::numeric_limits<uint32_t>::max()) {
  return [=](settings& s, const YAML::Node& value) -> std::string {
    auto text = scalar_of(value);
    try {
      size_t used = 0;
      auto n = std::stoll(text, &used);
      if (used == text.size() && n >= minimum && n <= maximum) {
        field(s) = static_cast<uint32_t>(n);
        return {};
      }
    } catch (const std::exception&) {
    }
    return "expected an integer in [" + std::to_string(minimum) + ", "
           + std::to_string(maximum) + "], got '" + text + "'";
  };
}

template <class Field>
apply_fn boolean(Field field) {
  return [=](settings& s, const YAML::Node& value) -> std::string {
    auto text = scalar_of(value);
    if (text == "true" || text == "false") {
      field(s) = text == "true";
      return {};
    }
    return "expected true or false, got '" + text + "'";
  };
}

template <class Field>
apply_fn text(Field field) {
  return [=](settings& s, const YAML::Node& value) -> std::string {
    if (!value.IsScalar())
      return "expected a string";
    field(s) = value.Scalar();
    return {};
  };
}

/// One of `names`, stored as the enum value of the same position.
template <class Enum, class Field>
apply_fn choice(Field field, std::vector<std::string> names) {
  return [=](settings& s, const YAML::Node& value) -> std::string {
    auto found = scalar_of(value);
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == found) {
        field(s) = static_cast<Enum>(i);
        return {};
      }
    }
    std::string allowed;
    for (const auto& n : names)
      allowed += (allowed.empty() ? "" : ", ") + n;
    return "expected one of " + allowed + ", got '" + found + "'";
  };
}

/// A pass pipeline: every name must be a known pass.
template <class Field>
apply_fn pipeline(Field field) {
  return [=](settings& s, const YAML::Node& value) -> std::string {
    if (!value.IsScalar())
      return "expected pass names separated by commas";
    try {
      compiler::pass_manager check(value.Scalar());
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    field(s) = value.Scalar();
    return {};
  };
}

#define GRADD_FIELD(member) [](settings& s) -> auto& { return s.member; }

} // namespace

const std::vector<key_spec>& schema() {
  static const std::vector<key_spec> table{
      {"compile", "mode", "async, sync", "async",
       "async: a new graph runs on the stock engine while its plan compiles; sync: it waits",
       choice<compile_mode>(GRADD_FIELD(compile.mode), {"async", "sync"})},
      {"compile", "threads", "integer 1..64", "1",
       "TBB threads for passes and plan building",
       integer(GRADD_FIELD(compile.threads), 1, 64)},
      {"compile", "timeout_ms", "integer >= 1", "10000",
       "a compile running longer counts as failed; sync mode waits at most this long",
       integer(GRADD_FIELD(compile.timeout_ms), 1)},
      {"compile", "delay_ms", "integer >= 0", "0",
       "test knob: every compile first waits this long",
       integer(GRADD_FIELD(compile.delay_ms), 0)},
      {"cache", "max_plans", "integer >= 1", "256",
       "plans kept; the least recently used one goes first (never while it runs)",
       integer(GRADD_FIELD(cache.max_plans), 1)},
      {"fallback", "on_compile_error", "retry_after, never_retry", "retry_after",
       "after a failed compile the stock engine serves that graph for a while, or for good",
       choice<compile_error_policy>(GRADD_FIELD(fallback.on_compile_error),
                                    {"retry_after", "never_retry"})},
      {"fallback", "retry_after_ms", "integer >= 0", "60000",
       "how long a failed graph stays on the stock engine before it compiles again",
       integer(GRADD_FIELD(fallback.retry_after_ms), 0)},
      {"fallback", "on_unsupported", "eager, error", "eager",
       "a backward gradd cannot run (Python nodes, nested tensors, ...): stock engine, or raise",
       choice<unsupported_policy>(GRADD_FIELD(fallback.on_unsupported), {"eager", "error"})},
      {"fallback", "force_eager", "true, false", "false",
       "serve every backward with the stock engine",
       boolean(GRADD_FIELD(fallback.force_eager))},
      {"nan_check", "enabled", "true, false", "false",
       "after each backward, raise naming the parameters or outputs whose gradients hold NaN",
       boolean(GRADD_FIELD(nan_check.enabled))},
      {"passes", "pipeline", "pass names, comma-separated", "default",
       "the graph passes, in order; default is the seed's end_capture order",
       pipeline(GRADD_FIELD(passes.pipeline))},
      {"passes", "gradient_ready", "true, false", "false",
       "run parameter-gradient paths first (gradient_ready_schedule), sums unchanged",
       boolean(GRADD_FIELD(passes.gradient_ready))},
      {"logging", "level", "error, warning, info, debug", "warning",
       "what gradd writes to stderr",
       choice<log_level>(GRADD_FIELD(logging.level), {"error", "warning", "info", "debug"})},
      {"logging", "ir_dump_dir", "path", "\"\"",
       "write each captured graph's IR (text and DOT) here, after capture and each pass",
       text(GRADD_FIELD(logging.ir_dump_dir))},
  };
  return table;
}

#undef GRADD_FIELD

} // namespace gradd::config
