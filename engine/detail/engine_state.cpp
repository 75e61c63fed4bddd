// Process-wide engine state and its statistics.

#include "engine/detail/engine_state.hpp"

#include <c10/util/Exception.h>

namespace gradd::engine::detail {

statistics counters::snapshot() const {
  statistics s;
  s.backwards = backwards.load();
  s.plan_backwards = plan_backwards.load();
  s.eager_backwards = eager_backwards.load();
  for (size_t i = 0; i < fallback_reason_count; ++i)
    s.eager_by_reason[i] = eager_by_reason[i].load();
  s.captures = captures.load();
  s.cache_hits = cache_hits.load();
  s.cache_misses = cache_misses.load();
  return s;
}

void counters::reset() {
  backwards = 0;
  plan_backwards = 0;
  eager_backwards = 0;
  for (auto& n : eager_by_reason)
    n = 0;
  captures = 0;
  cache_hits = 0;
  cache_misses = 0;
}

engine_state& engine_state::instance() {
  static auto* state = new engine_state;
  return *state;
}

void engine_state::count_fallback(fallback_reason reason) {
  auto bit = 1u << static_cast<uint32_t>(reason);
  stats.eager_backwards.fetch_add(1, std::memory_order_relaxed);
  stats.eager_by_reason[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
  if ((warned_reasons_.fetch_or(bit) & bit) == 0)
    TORCH_WARN("gradd: a backward ran on the stock engine: ", to_string(reason),
               " (warned once per reason; see gradd::stats())");
}

} // namespace gradd::engine::detail
