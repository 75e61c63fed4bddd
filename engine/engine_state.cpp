// Process-wide engine state and its statistics.

#include "engine/engine_state.hpp"

#include "compiler/portable_key.hpp"
#include "config/log.hpp"
#include "cuda/graph_path.hpp"

#include <algorithm>

#include <functional>
#include <string>

namespace gradd::engine {

namespace {

/// Per structure, what the report says of its CUDA graphs.
constexpr size_t coverage_names = 6;

/// What this process reports to the daemon (`gradd status`): its
/// statistics, then, as `structure.<id>.<field>`, what CUDA graphs cover of
/// each structure they served or keep off, as many as the report holds.
actors::statistics_fields reported_fields() {
  auto f = fields(gradd::stats());
  for (const auto& g : gradd::graph_stats()) {
    if (g.cuda_graphs == 0 && g.graph_backwards == 0 && g.plans_only.empty())
      continue;
    if (f.size() + coverage_names > actors::max_report_names)
      break;
    auto prefix = "structure." + std::to_string(g.id) + ".";
    f.emplace_back(prefix + "nodes", g.nodes);
    f.emplace_back(prefix + "hits", g.hits);
    f.emplace_back(prefix + "graph_backwards", g.graph_backwards);
    f.emplace_back(prefix + "graph_pieces", g.graph_pieces);
    f.emplace_back(prefix + "live_nodes", g.live_nodes);
    f.emplace_back(prefix + "plans_only", g.plans_only.empty() ? 0 : 1);
  }
  return f;
}

/// The time from now until `deadline`, zero once it has passed.
std::chrono::milliseconds left_until(std::chrono::steady_clock::time_point deadline) {
  auto left = deadline - std::chrono::steady_clock::now();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
      std::max(left, std::chrono::steady_clock::duration::zero()));
}

} // namespace

statistics counters::snapshot() const {
  statistics s;
  s.backwards = backwards.load();
  s.plan_backwards = plan_backwards.load();
  s.eager_backwards = eager_backwards.load();
  s.raised_backwards = raised_backwards.load();
  for (size_t i = 0; i < fallback_reason_count; ++i)
    s.eager_by_reason[i] = eager_by_reason[i].load();
  s.captures = captures.load();
  s.plans_loaded = plans_loaded.load();
  s.cache_hits = cache_hits.load();
  s.cache_misses = cache_misses.load();
  s.daemon_plans = daemon.plans.load();
  s.daemon_fallbacks = daemon.fallbacks.load();
  return s;
}

void counters::reset() {
  backwards = 0;
  plan_backwards = 0;
  eager_backwards = 0;
  raised_backwards = 0;
  for (auto& n : eager_by_reason)
    n = 0;
  captures = 0;
  plans_loaded = 0;
  cache_hits = 0;
  cache_misses = 0;
  daemon.plans = 0;
  daemon.fallbacks = 0;
}

serving_policy::serving_policy(std::shared_ptr<const settings> config)
    : config(std::move(config)),
      plan_variant(compiler::plan_variant(this->config->passes.effective_pipeline())) {}

void engine_state::use_settings(const std::shared_ptr<const settings>& config) {
  if (policy_.load()->config != config)
    policy_.store(std::make_shared<const serving_policy>(config));
}

engine_state& engine_state::instance() {
  static auto* state = new engine_state;
  return *state;
}

void engine_state::start(const std::shared_ptr<const settings>& config) {
  {
    std::shared_lock lock(pipeline_mutex_);
    if (pipeline_ && pipeline_settings_ == config)
      return;
  }
  stop();
  auto started = std::make_shared<actors::pipeline>(*config, sink_, stats.daemon,
                                                     reported_fields);
  std::unique_lock lock(pipeline_mutex_);
  pipeline_ = std::move(started);
  pipeline_settings_ = config;
}

void engine_state::stop() {
  std::shared_ptr<actors::pipeline> stopping;
  {
    std::unique_lock lock(pipeline_mutex_);
    stopping = std::move(pipeline_);
    pipeline_settings_.reset();
  }
  if (!stopping)
    return;
  // Outside the lock: statistics and submits go on while compiles settle.
  stopping->stop();
  std::unique_lock lock(pipeline_mutex_);
  compiles_before_ += stopping->finished();
}

void engine_state::drain_at_exit(std::chrono::milliseconds grace) {
  exiting_.store(true);  // before the drain wakes the backwards waiting for compiles
  auto until = std::chrono::steady_clock::now() + grace;
  {
    std::shared_lock lock(pipeline_mutex_);
    if (pipeline_)
      pipeline_->drain(grace);
  }
  cuda::drain_graph_captures(left_until(until));
}

bool engine_state::submit(uint64_t graph_id, compiler::graph node_table) {
  std::shared_lock lock(pipeline_mutex_);
  return pipeline_ && pipeline_->submit(graph_id, std::move(node_table));
}

bool engine_state::propose(uint64_t graph_id, uint64_t proposal) {
  std::shared_lock lock(pipeline_mutex_);
  return pipeline_ && pipeline_->propose(graph_id, proposal);
}

bool engine_state::wait_idle(std::chrono::milliseconds timeout) {
  std::shared_ptr<actors::pipeline> running;
  {
    std::shared_lock lock(pipeline_mutex_);
    running = pipeline_;
  }
  auto until = std::chrono::steady_clock::now() + timeout;
  if (running && !running->wait_idle(timeout))
    return false;
  // A capture request comes from a backward, not from the pipeline.
  return cuda::wait_graph_captures(left_until(until));
}

std::pair<uint64_t, uint64_t> engine_state::compile_counts() const {
  std::shared_lock lock(pipeline_mutex_);
  if (!pipeline_)
    return {compiles_before_ - compiles_reset_, 0};
  return {compiles_before_ + pipeline_->finished() - compiles_reset_, pipeline_->in_flight()};
}

void engine_state::reset_statistics() {
  stats.reset();
  cuda::reset_graph_statistics();
  std::unique_lock lock(pipeline_mutex_);
  compiles_reset_ = compiles_before_ + (pipeline_ ? pipeline_->finished() : 0);
}

void engine_state::count_fallback(fallback_reason reason) {
  stats.eager_backwards.fetch_add(1, std::memory_order_relaxed);
  stats.eager_by_reason[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
}

void engine_state::warn_fallback(fallback_reason reason) {
  auto bit = 1u << static_cast<uint32_t>(reason);
  // Running eager while a plan compiles is the design, not a problem.
  auto level = reason == fallback_reason::compile_pending ? log_level::info : log_level::warning;
  if ((warned_reasons_.fetch_or(bit) & bit) == 0)
    log(current_policy()->config->logging.level, level,
        std::string("a backward ran on the stock engine: ") + to_string(reason)
            + " (said once per reason; see gradd::stats())");
}

} // namespace gradd::engine
