// The in-process API: enabling, guards, statistics.

#include "engine/gradd.hpp"

#include "engine/detail/entry_gate.hpp"
#include "engine/detail/engine_state.hpp"

#include <cstdlib>
#include <mutex>
#include <tuple>
#include <ostream>

namespace gradd {

namespace {

using engine::detail::engine_state;

/// Serializes enable/disable; the flag mirrors what libtorch has installed.
std::mutex switch_mutex;
std::atomic<bool> enabled{false};

} // namespace

const char* to_string(fallback_reason reason) noexcept {
  switch (reason) {
    case fallback_reason::force_eager: return "force_eager";
    case fallback_reason::create_graph: return "create_graph";
    case fallback_reason::anomaly_mode: return "anomaly_mode";
    case fallback_reason::python_node: return "python_node";
    case fallback_reason::python_hook: return "python_hook";
    case fallback_reason::nested_tensor: return "nested_tensor";
    case fallback_reason::capture_hook: return "capture_hook";
    case fallback_reason::compile_pending: return "compile_pending";
    case fallback_reason::compile_error: return "compile_error";
  }
  return "?";
}

std::ostream& operator<<(std::ostream& out, const statistics& s) {
  out << "backwards=" << s.backwards << " plan_backwards=" << s.plan_backwards
      << " eager_backwards=" << s.eager_backwards << " captures=" << s.captures
      << " cache_hits=" << s.cache_hits << " cache_misses=" << s.cache_misses
      << " plans=" << s.plans << " compiles=" << s.compiles;
  for (size_t i = 0; i < fallback_reason_count; ++i)
    if (s.eager_by_reason[i] > 0)
      out << " eager." << to_string(static_cast<fallback_reason>(i)) << '='
          << s.eager_by_reason[i];
  return out;
}

void enable(const settings& config) {
  std::lock_guard lock(switch_mutex);
  static bool stop_at_exit = (std::atexit([] { engine_state::instance().stop(); }), true);
  (void)stop_at_exit;
  engine_state::instance().start(config);
  engine::detail::switch_hook(true);
  enabled = true;
}

void enable(const std::string& config_path) {
  enable(load_settings(config_path));
}

void disable() {
  std::lock_guard lock(switch_mutex);
  engine::detail::switch_hook(false);
  enabled = false;
  engine_state::instance().stop();
}

bool is_enabled() noexcept {
  return enabled.load();
}

void reset() {
  auto& state = engine_state::instance();
  state.table.clear();
  state.reset_statistics();
}

statistics stats() {
  auto& state = engine_state::instance();
  auto s = state.stats.snapshot();
  s.plans = state.table.plans();
  std::tie(s.compiles, s.compiles_in_flight) = state.compile_counts();
  return s;
}

std::vector<graph_statistics> graph_stats() {
  return engine_state::instance().table.statistics();
}

bool wait_for_compiles(std::chrono::milliseconds timeout) {
  return engine_state::instance().wait_idle(timeout);
}

enable_guard::enable_guard(const settings& config)
    : was_enabled_(is_enabled()),
      previous_(*engine_state::instance().current_settings()) {
  enable(config);
}

enable_guard::enable_guard(const std::string& config_path)
    : enable_guard(load_settings(config_path)) {}

enable_guard::~enable_guard() {
  if (was_enabled_)
    enable(previous_);
  else
    disable();
}

disable_guard::disable_guard() : was_enabled_(is_enabled()) {
  // A scope, not a shutdown: the hook goes, the pipeline stays for the
  // enabled state this scope returns to.
  std::lock_guard lock(switch_mutex);
  engine::detail::switch_hook(false);
  enabled = false;
}

disable_guard::~disable_guard() {
  if (!was_enabled_)
    return;
  std::lock_guard lock(switch_mutex);
  engine::detail::switch_hook(true);
  enabled = true;
}

} // namespace gradd
