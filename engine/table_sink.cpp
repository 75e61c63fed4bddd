// The plan table behind the pipeline's narrow view of it.

#include "engine/table_sink.hpp"

namespace gradd::engine {

std::optional<table_sink::time_point> table_sink::pending_since(uint64_t graph_id) const {
  auto record = table_.record(graph_id);
  if (!record || record->state.load() != graph_state::pending)
    return std::nullopt;
  return record->claimed_at;
}

uint64_t table_sink::portable_key(uint64_t graph_id) const {
  auto record = table_.record(graph_id);
  return record ? record->portable_key : 0;
}

void table_sink::publish(uint64_t graph_id, compiler::graph ir, compiler::plan plan,
                         double compile_ms, size_t max_plans) {
  auto record = table_.record(graph_id);
  if (!record)
    return;
  record->compiles.fetch_add(1);
  auto compiled = std::make_shared<compiled_graph>();
  compiled->ir = std::move(ir);
  compiled->plan = std::move(plan);
  table_.publish(*record, std::move(compiled), compile_ms, max_plans);
}

void table_sink::fail(uint64_t graph_id, time_point retry_at) {
  if (auto record = table_.record(graph_id)) {
    record->compiles.fetch_add(1);
    table_.fail(*record, fallback_reason::compile_error, retry_at);
  }
}

void table_sink::drop(uint64_t graph_id) {
  if (auto record = table_.record(graph_id))
    table_.drop(*record);
}

void table_sink::drop_pending() {
  table_.drop_pending();
}

void table_sink::hold_for_agreement(uint64_t graph_id, std::chrono::milliseconds longest_wait) {
  if (auto record = table_.record(graph_id))
    record->hold_for_agreement(longest_wait);
}

static_assert(table_sink::no_answer == graph_record::not_agreed);

void table_sink::included(uint64_t graph_id, uint64_t proposal) {
  if (auto record = table_.record(graph_id))
    record->included(proposal);
}

bool table_sink::agree(uint64_t graph_id, uint64_t serve_from) {
  auto record = table_.record(graph_id);
  return !record || record->agree(serve_from);
}

} // namespace gradd::engine
