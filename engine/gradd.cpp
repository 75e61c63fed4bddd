// The in-process API: enabling, guards, statistics.

#include "gradd/gradd.hpp"

#include "config/log.hpp"
#include "config/usable.hpp"
#include "cuda/capture_gate.hpp"
#include "cuda/graph_path.hpp"
#include "engine/engine_state.hpp"
#include "engine/lifecycle.hpp"
#include "execute/current_node.hpp"

#include <mutex>
#include <ostream>
#include <tuple>

namespace gradd {

namespace {

using engine::change_mode;
using engine::close_scope;
using engine::engine_mode;
using engine::engine_state;
using engine::open_scope;

/// `config`, shared, once check_usable found it usable.
std::shared_ptr<const settings> usable(const settings& config) {
  check_usable(config);
  static std::once_flag told;
  std::call_once(told, [&] {
    if (!execute::current_node_reachable())
      log(config.logging.level, log_level::warning,
          "this libtorch's current autograd node cannot be set: code run by nodes that "
          "plans run sees the caller's (torch._C._current_autograd_node)");
  });
  return std::make_shared<const settings>(config);
}

} // namespace

const char* to_string(fallback_reason reason) noexcept {
  switch (reason) {
    case fallback_reason::force_eager: return "force_eager";
    case fallback_reason::create_graph: return "create_graph";
    case fallback_reason::anomaly_mode: return "anomaly_mode";
    case fallback_reason::nested_tensor: return "nested_tensor";
    case fallback_reason::capture_hook: return "capture_hook";
    case fallback_reason::compile_pending: return "compile_pending";
    case fallback_reason::compile_error: return "compile_error";
  }
  return "?";
}

const char* to_string(graph_state state) noexcept {
  switch (state) {
    case graph_state::pending: return "pending";
    case graph_state::ready: return "ready";
    case graph_state::failed: return "failed";
  }
  return "?";
}

std::vector<std::pair<std::string, uint64_t>> fields(const statistics& s) {
  std::vector<std::pair<std::string, uint64_t>> f{
      {"backwards", s.backwards},
      {"plan_backwards", s.plan_backwards},
      {"eager_backwards", s.eager_backwards},
      {"raised_backwards", s.raised_backwards},
      {"captures", s.captures},
      {"plans_loaded", s.plans_loaded},
      {"cache_hits", s.cache_hits},
      {"cache_misses", s.cache_misses},
      {"plans", s.plans},
      {"compiles", s.compiles},
      {"compiles_in_flight", s.compiles_in_flight},
      {"daemon_plans", s.daemon_plans},
      {"daemon_fallbacks", s.daemon_fallbacks},
      {"graph_backwards", s.graph_backwards},
      {"piecewise_backwards", s.piecewise_backwards},
      {"graph_eager_rests", s.graph_eager_rests},
      {"graph_recordings", s.graph_recordings},
      {"backwards_during_capture", s.backwards_during_capture},
      {"graphs", s.graphs},
      {"graph_bytes", s.graph_bytes},
      {"graph_bound_bytes", s.graph_bound_bytes},
      {"graph_rewrites", s.graph_rewrites},
      {"graph_early_launches", s.graph_early_launches},
      {"graph_early_misses", s.graph_early_misses},
      {"graph_bets_before_engine", s.graph_bets_before_engine},
      {"graph_hits_before_engine", s.graph_hits_before_engine},
      {"graph_bets_before_walk", s.graph_bets_before_walk},
      {"graph_captures", s.graph_captures},
      {"graph_capture_failures", s.graph_capture_failures},
      {"graph_evictions", s.graph_evictions},
      {"graph_copy_on_writes", s.graph_copy_on_writes},
      {"graph_lent_elsewhere", s.graph_lent_elsewhere},
      {"graph_other_stream", s.graph_other_stream},
      {"graph_walk_ns", s.graph_walk_ns},
      {"graph_lift_ns", s.graph_lift_ns},
      {"graph_copy_ns", s.graph_copy_ns},
      {"graph_launch_ns", s.graph_launch_ns},
      {"graph_cuda_launch_ns", s.graph_cuda_launch_ns},
      {"graph_live_read_ns", s.graph_live_read_ns},
      {"graph_hand_out_ns", s.graph_hand_out_ns},
  };
  for (size_t i = 0; i < fallback_reason_count; ++i)
    if (s.eager_by_reason[i] > 0)
      f.emplace_back(std::string("eager.") + to_string(static_cast<fallback_reason>(i)),
                     s.eager_by_reason[i]);
  return f;
}

std::ostream& operator<<(std::ostream& out, const statistics& s) {
  const char* separator = "";
  for (const auto& [name, value] : fields(s)) {
    out << separator << name << '=' << value;
    separator = " ";
  }
  return out;
}

void enable(const settings& config) {
  change_mode([enabled = engine_mode{true, true, usable(config)}](engine_mode& mode) {
    mode = enabled;
  });
}

void enable(const std::string& config_path) {
  enable(load_settings(config_path));
}

void disable() {
  change_mode([](engine_mode& mode) {
    mode.hooked = false;
    mode.compiling = false;
  });
}

bool is_enabled() noexcept {
  return engine::hook_installed();
}

void reset() {
  // Statistics first: backwards that the clear wakes count after the reset.
  auto& state = engine_state::instance();
  state.reset_statistics();
  state.table.clear();
  cuda::drop_graphs();
}

statistics stats() {
  auto& state = engine_state::instance();
  auto s = state.stats.snapshot();
  s.plans = state.table.plans();
  std::tie(s.compiles, s.compiles_in_flight) = state.compile_counts();
  cuda::add_graph_statistics(s);
  return s;
}

std::vector<graph_statistics> graph_stats() {
  auto all = engine_state::instance().table.statistics();
  for (auto& g : all)
    cuda::add_graph_coverage(g);
  return all;
}

bool wait_for_compiles(std::chrono::milliseconds timeout) {
  return engine_state::instance().wait_idle(timeout);
}

void synchronize_device() {
  cuda::synchronize_after_captures();
}

enable_guard::enable_guard(const settings& config)
    : scope_(open_scope([enabled = engine_mode{true, true, usable(config)}](const engine_mode&) {
        return enabled;
      })) {}

enable_guard::enable_guard(const std::string& config_path)
    : enable_guard(load_settings(config_path)) {}

enable_guard::~enable_guard() {
  close_scope(scope_);
}

disable_guard::disable_guard()
    : scope_(open_scope([](engine_mode mode) {
        // A scope, not a shutdown: the hook goes, the pipeline and settings
        // of the enclosing mode stay for when the scope ends.
        mode.hooked = false;
        return mode;
      })) {}

disable_guard::~disable_guard() {
  close_scope(scope_);
}

} // namespace gradd
