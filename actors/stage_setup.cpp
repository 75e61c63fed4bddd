// When a compile in flight stops early, and how a stage's failure reads.

#include "actors/stage_setup.hpp"

#include <exception>

namespace gradd::actors {

std::optional<caf::error> stage_setup::interruption(uint64_t graph_id) const {
  if (is_stopping())
    return make_error(errc::cancelled, "gradd is stopping");
  auto claimed_at = sink->pending_since(graph_id);
  if (!claimed_at)
    return make_error(errc::cancelled, "the graph was dropped (reset)");
  if (std::chrono::steady_clock::now()
      > *claimed_at + std::chrono::milliseconds(config.compile.timeout_ms))
    return make_error(errc::timed_out, "compile.timeout_ms ("
                                           + std::to_string(config.compile.timeout_ms)
                                           + " ms) passed");
  return std::nullopt;
}

void stage_setup::check_interruption(uint64_t graph_id) const {
  if (auto why = interruption(graph_id))
    throw interrupted(static_cast<errc>(why->code()), what(*why));
}

compile_result stage_setup::failure(uint64_t graph_id, const std::string& stage) {
  compile_result result;
  result.graph_id = graph_id;
  try {
    throw;
  } catch (const interrupted& e) {
    result.error = make_error(e.code, e.what());
  } catch (const std::exception& e) {
    result.error = make_error(errc::compile_failed, stage + ": " + e.what());
  } catch (...) {
    result.error = make_error(errc::compile_failed, stage + ": an unknown exception");
  }
  return result;
}

} // namespace gradd::actors
