// The in-process API: enabling, guards, statistics.

#include "engine/gradd.hpp"

#include "engine/detail/backward_hook.hpp"
#include "engine/detail/engine_state.hpp"

#include <torch/csrc/autograd/engine.h>

#include <mutex>
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
    case fallback_reason::compile_error: return "compile_error";
  }
  return "?";
}

std::ostream& operator<<(std::ostream& out, const statistics& s) {
  out << "backwards=" << s.backwards << " plan_backwards=" << s.plan_backwards
      << " eager_backwards=" << s.eager_backwards << " captures=" << s.captures
      << " cache_hits=" << s.cache_hits << " cache_misses=" << s.cache_misses
      << " plans=" << s.plans;
  for (size_t i = 0; i < fallback_reason_count; ++i)
    if (s.eager_by_reason[i] > 0)
      out << " eager." << to_string(static_cast<fallback_reason>(i)) << '='
          << s.eager_by_reason[i];
  return out;
}

void enable(const settings& config) {
  std::lock_guard lock(switch_mutex);
  engine_state::instance().set_settings(config);
  torch::autograd::Engine::set_compiled_autograd(&engine::detail::serve_backward);
  enabled = true;
}

void disable() {
  std::lock_guard lock(switch_mutex);
  torch::autograd::Engine::set_compiled_autograd(nullptr);
  enabled = false;
}

bool is_enabled() noexcept {
  return enabled.load();
}

void reset() {
  auto& state = engine_state::instance();
  state.cache.clear();
  state.stats.reset();
}

statistics stats() {
  auto& state = engine_state::instance();
  auto s = state.stats.snapshot();
  s.plans = state.cache.size();
  return s;
}

enable_guard::enable_guard(const settings& config)
    : was_enabled_(is_enabled()),
      previous_(*engine_state::instance().current_settings()) {
  enable(config);
}

enable_guard::~enable_guard() {
  if (was_enabled_)
    enable(previous_);
  else
    disable();
}

disable_guard::disable_guard()
    : was_enabled_(is_enabled()),
      previous_(*engine_state::instance().current_settings()) {
  disable();
}

disable_guard::~disable_guard() {
  if (was_enabled_)
    enable(previous_);
}

} // namespace gradd
