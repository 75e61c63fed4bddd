// When a compile in flight stops early.

#include "actors/stage_context.hpp"

#include <stdexcept>

namespace gradd::actors {

std::optional<std::string> stage_context::interruption(uint64_t graph_id) const {
  if (stopping.load())
    return "cancelled: gradd is stopping";
  auto record = table->record(graph_id);
  if (!record || record->state.load() != engine::detail::graph_state::pending)
    return "cancelled: the graph was dropped (reset)";
  auto deadline = record->claimed_at + std::chrono::milliseconds(config.compile.timeout_ms);
  if (std::chrono::steady_clock::now() > deadline)
    return "timed out: compile.timeout_ms (" + std::to_string(config.compile.timeout_ms)
           + " ms) passed";
  return std::nullopt;
}

void stage_context::check_interruption(uint64_t graph_id) const {
  if (auto why = interruption(graph_id))
    throw std::runtime_error(*why);
}

} // namespace gradd::actors
