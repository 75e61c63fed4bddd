// Note [Bets before the engine] (early_bet.hpp).

#include "engine/detail/early_bet.hpp"

#include "engine/detail/engine_state.hpp"
#include "engine/detail/graph_walk.hpp"
#include "engine/detail/plan_runner.hpp"

#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/anomaly_mode.h>
#include <torch/csrc/autograd/functions/basic_ops.h>

#include <algorithm>

namespace gradd::engine::detail {

namespace {

using torch::autograd::Edge;

thread_local cuda::early_bet pending;

/// The walk `place` made, until the hook adopts it or the scope ends. The
/// policy it was made under is held, so that no other can take its address.
struct placed_walk {
  graph_walk walk;
  std::shared_ptr<const serving_policy> policy;  ///< null: none to adopt
  /// The edges it was walked from: the hook's GraphRoot must have these.
  std::vector<std::pair<const torch::autograd::Node*, uint32_t>> roots;
};
thread_local placed_walk walked;

/// Whether the backward starts on a CUDA stream: a CPU one has no graph.
bool starts_on_cuda(const std::vector<Edge>& roots) {
  if (roots.empty() || !roots.front().function)
    return false;
  auto stream = roots.front().function->stream();
  return stream && stream->device_type() == c10::DeviceType::CUDA;
}

cuda::early_bet place(const std::vector<Edge>& roots, const torch::autograd::variable_list& inputs,
                      bool keep_graph, bool create_graph, bool accumulate_grad,
                      const std::vector<Edge>& outputs) {
  // The hook sends these to the stock engine.
  if (create_graph || torch::autograd::AnomalyMode::is_enabled())
    return nullptr;
  auto& state = engine_state::instance();
  auto policy = state.current_policy();
  const auto& config = *policy->config;
  if (config.fallback.force_eager)
    return nullptr;
  auto walk_began = std::chrono::steady_clock::now();
  // The hook adopts this walk (adopt_walk), bet or not.
  auto& walk = walked.walk;
  torch::autograd::GraphRoot root(roots, inputs);
  walk_graph(root, outputs, keep_graph, accumulate_grad, policy->plan_variant, walk);
  walked.policy = policy;
  walked.roots.clear();
  for (const auto& e : roots)
    walked.roots.emplace_back(e.function.get(), e.input_nr);
  if (!config.cuda_graphs.enabled || !config.cuda_graphs.early_launch || !starts_on_cuda(roots))
    return nullptr;
  auto record = state.table
                    .find(walk.key,
                          [&](const graph_record& r) {
                            return sequence_order_holds(r.compiled->plan, walk.nodes);
                          })
                    .ready;
  // A plan the ranks agree on serves from an index the hook counts.
  if (!record || record->state.load(std::memory_order_acquire) != graph_state::ready
      || record->serve_from.load() != 0)
    return nullptr;
  c10::AutoGradMode no_grad(false);  // as in the hook: create_graph is false
  return cuda::bet_before_engine(record->id, record->compiled->ir, walk.nodes, config,
                                 walk_began);
}

} // namespace

early_bet_scope::early_bet_scope(const std::vector<Edge>& roots,
                                 const torch::autograd::variable_list& inputs, bool keep_graph,
                                 bool create_graph, bool accumulate_grad,
                                 const std::vector<Edge>& outputs)
    : outer_(std::move(pending)) {
  pending = place(roots, inputs, keep_graph, create_graph, accumulate_grad, outputs);
}

early_bet_scope::~early_bet_scope() {
  pending = std::move(outer_);
  walked.policy.reset();
}

cuda::early_bet take_early_bet() noexcept {
  return std::move(pending);
}

bool adopt_walk(const serving_policy& policy, torch::autograd::Node& root,
                graph_walk& into) noexcept {
  const auto& edges = root.next_edges();
  bool made_here = walked.policy.get() == &policy && edges.size() == walked.roots.size()
                   && std::equal(edges.begin(), edges.end(), walked.roots.begin(),
                                 [](const Edge& e, const auto& walked_from) {
                                   return e.function.get() == walked_from.first
                                          && e.input_nr == walked_from.second;
                                 });
  walked.policy.reset();
  if (!made_here)
    return false;
  std::swap(into, walked.walk);
  into.nodes.front() = &root;
  return true;
}

} // namespace gradd::engine::detail
