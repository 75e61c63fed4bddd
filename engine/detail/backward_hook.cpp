// Dispatch of one backward: walk, look up, run a plan or fall back.
//
// The order of checks is the cost order: settings and thread-local modes
// first (free), then the walk that every plan needs anyway, then one cache
// lookup. A miss captures and compiles on the calling thread and serves this
// very backward with the new plan.

#include "engine/detail/backward_hook.hpp"

#include "compiler/plan.hpp"
#include "engine/detail/capture.hpp"
#include "engine/detail/eager_fallback.hpp"
#include "engine/detail/engine_state.hpp"
#include "engine/detail/graph_walk.hpp"
#include "engine/detail/plan_runner.hpp"
#include "engine/detail/post_processing.hpp"

#include <ATen/ThreadLocalState.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/anomaly_mode.h>
#include <torch/csrc/autograd/graph_task.h>

namespace gradd::engine::detail {

namespace {

/// Walk storage of this thread, one per nesting level of backward-in-backward.
class walk_scope {
public:
  walk_scope() {
    if (depth_ == walks_.size())
      walks_.push_back(std::make_unique<graph_walk>());
    walk_ = walks_[depth_++].get();
  }
  ~walk_scope() { --depth_; }
  graph_walk& operator*() const noexcept { return *walk_; }

private:
  static thread_local std::vector<std::unique_ptr<graph_walk>> walks_;
  static thread_local size_t depth_;
  graph_walk* walk_;
};

thread_local std::vector<std::unique_ptr<graph_walk>> walk_scope::walks_;
thread_local size_t walk_scope::depth_ = 0;

plan_cache::entry compile(const graph_walk& walk, const torch::autograd::GraphTask& task,
                          const std::vector<torch::autograd::Edge>& outputs, bool accumulate_grad,
                          engine_state& state) {
  auto compiled = std::make_shared<compiled_graph>();
  try {
    auto captured = capture_graph(walk, task, outputs, accumulate_grad);
    state.stats.captures.fetch_add(1, std::memory_order_relaxed);
    compiled->eager_reason = captured.eager_reason;
    compiled->ir = std::move(captured.ir);
    if (!compiled->eager_reason)
      compiled->plan = compiler::build_plan(compiled->ir);
  } catch (const std::exception& e) {
    TORCH_WARN("gradd: compiling a backward failed, the stock engine serves it: ", e.what());
    compiled->eager_reason = fallback_reason::compile_error;
  }
  state.cache.insert(walk.key, compiled);
  return compiled;
}

} // namespace

torch::autograd::variable_list serve_backward(
    const std::shared_ptr<torch::autograd::Node>& graph_root,
    const torch::autograd::GraphTask& task, bool accumulate_grad,
    const std::vector<torch::autograd::Edge>& outputs) {
  auto& state = engine_state::instance();
  state.stats.backwards.fetch_add(1, std::memory_order_relaxed);
  auto eager = [&](fallback_reason reason) {
    state.count_fallback(reason);
    return run_on_stock_engine(graph_root, task);
  };
  if (state.current_settings()->force_eager)
    return eager(fallback_reason::force_eager);

  auto& live_task = const_cast<torch::autograd::GraphTask&>(task);
  // The stock engine's workers run nodes under the task's thread-local state,
  // whose grad mode is create_graph.
  at::ThreadLocalStateGuard tls_guard(task.thread_locals_);
  if (c10::GradMode::is_enabled())
    return eager(fallback_reason::create_graph);
  if (torch::autograd::AnomalyMode::is_enabled())
    return eager(fallback_reason::anomaly_mode);

  walk_scope scope;
  auto& walk = *scope;
  walk_graph(*graph_root, outputs, task.keep_graph_, accumulate_grad, walk);
  auto compiled = state.cache.find(walk.key, [&](const compiled_graph& c) {
    return c.eager_reason || sequence_order_holds(c.plan, walk.nodes);
  });
  if (compiled) {
    state.stats.cache_hits.fetch_add(1, std::memory_order_relaxed);
  } else {
    state.stats.cache_misses.fetch_add(1, std::memory_order_relaxed);
    compiled = compile(walk, task, outputs, accumulate_grad, state);
  }
  if (compiled->eager_reason)
    return eager(*compiled->eager_reason);

  run_plan(compiled->plan, walk.nodes, live_task);
  run_post_processing(live_task);
  state.stats.plan_backwards.fetch_add(1, std::memory_order_relaxed);
  return std::move(live_task.captured_vars_);
}

} // namespace gradd::engine::detail
