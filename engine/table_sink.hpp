#pragma once

// The plan table as the pipeline sees it (actors/plan_sink.hpp).

#include "actors/plan_sink.hpp"
#include "engine/plan_table.hpp"

namespace gradd::engine {

class table_sink final : public actors::plan_sink {
public:
  explicit table_sink(plan_table& table) : table_(table) {}

  std::optional<time_point> pending_since(uint64_t graph_id) const override;
  uint64_t portable_key(uint64_t graph_id) const override;
  void publish(uint64_t graph_id, compiler::graph ir, compiler::plan plan, double compile_ms,
               size_t max_plans) override;
  void fail(uint64_t graph_id, time_point retry_at) override;
  void drop(uint64_t graph_id) override;
  void drop_pending() override;
  void hold_for_agreement(uint64_t graph_id, std::chrono::milliseconds longest_wait) override;
  void included(uint64_t graph_id, uint64_t proposal) override;
  bool agree(uint64_t graph_id, uint64_t serve_from) override;

private:
  plan_table& table_;
};

} // namespace gradd::engine
