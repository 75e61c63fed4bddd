// Note [Bets before the engine] (early_bet.hpp).

#include "engine/early_bet.hpp"

#include "capture/graph_walk.hpp"
#include "engine/engine_state.hpp"
#include "engine/post_processing.hpp"
#include "execute/plan_runner.hpp"

#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/anomaly_mode.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/functions/basic_ops.h>

#include <algorithm>
#include <typeinfo>
#include <utility>

namespace gradd::engine {

namespace {

using torch::autograd::Edge;

thread_local cuda::early_bet pending;

/// The walk `place` made, until the hook adopts it or the scope ends. The
/// policy it was made under is held, so that no other can take its address.
struct placed_walk {
  capture::graph_walk walk;
  std::shared_ptr<const serving_policy> policy;  ///< null: none to adopt
  /// The edges it was walked from: the hook's GraphRoot must have these.
  std::vector<std::pair<const torch::autograd::Node*, uint32_t>> roots;
  /// The walk's first node, holding the gradients the backward starts from.
  std::shared_ptr<torch::autograd::GraphRoot> root;
  std::shared_ptr<graph_record> record;  ///< the plan a bet was placed for
};
thread_local placed_walk walked;

/// The structure this thread's last backwards were served from before the
/// engine, and how many in a row (Note [Bets before the walk]).
struct served_streak {
  std::weak_ptr<graph_record> record;
  std::weak_ptr<const serving_policy> policy;
  const std::type_info* head_type = nullptr;  ///< of its root edge's node
  c10::Stream stream{c10::Stream::DEFAULT, c10::Device(c10::DeviceType::CPU)};
  uint32_t length = 0;
  /// The length a bet before the walk needs: doubled by each such bet the
  /// walk finds placed on another structure, so that a loop whose runs of
  /// one structure are shorter than it stops betting before the walk; two
  /// again once the plan it was served from is gone.
  uint32_t needed = 2;
};
thread_local served_streak streak;

/// The most a streak is made to need: a bet before the walk still pays
/// in a loop whose other structure comes once in that many backwards.
constexpr uint32_t most_needed = 64;

/// Launches the graph of the structure this thread's streak was served
/// from, for a backward from `roots` that looks like it, before the walk:
/// null where the streak is shorter than two, the backward starts
/// elsewhere, or the bet needs more of the walk than its head. Its record
/// goes to `placed_for`.
cuda::early_bet bet_before_walk(const std::vector<Edge>& roots,
                                const std::shared_ptr<const serving_policy>& policy,
                                std::shared_ptr<graph_record>& placed_for) {
  if (streak.length < streak.needed || !streak.head_type || roots.size() != 1 || !roots[0].function
      || typeid(*roots[0].function) != *streak.head_type || streak.policy.lock() != policy)
    return nullptr;
  auto record = streak.record.lock();
  if (!record || record->state.load(std::memory_order_acquire) != graph_state::ready)
    return nullptr;
  // The walk's first nodes: its root, then the root edge's node.
  std::vector<torch::autograd::Node*> head{walked.root.get(), roots[0].function.get()};
  auto bet = cuda::bet_before_walk(record->id, record->compiled->ir, head, *policy->config,
                                   streak.stream);
  if (bet)
    placed_for = std::move(record);
  return bet;
}

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
  c10::AutoGradMode no_grad(false);  // as in the hook: create_graph is false
  walked.root = std::make_shared<torch::autograd::GraphRoot>(roots, inputs);
  std::shared_ptr<graph_record> placed_for;
  auto early = bet_before_walk(roots, policy, placed_for);
  auto walk_began = std::chrono::steady_clock::now();
  // The hook adopts this walk (adopt_walk), bet or not.
  auto& walk = walked.walk;
  capture::walk_graph(*walked.root, outputs, keep_graph, accumulate_grad, policy->plan_variant, walk);
  walked.policy = policy;
  walked.roots.clear();
  for (const auto& e : roots)
    walked.roots.emplace_back(e.function.get(), e.input_nr);
  std::shared_ptr<graph_record> record;
  if (config.cuda_graphs.enabled && config.cuda_graphs.early_launch && starts_on_cuda(roots)) {
    record = state.table
                 .find(walk.key,
                       [&](const graph_record& r) {
                         return execute::sequence_order_holds(r.compiled->plan, walk.nodes);
                       })
                 .ready;
    // A plan the ranks agree on serves from an index the hook counts.
    if (record
        && (record->state.load(std::memory_order_acquire) != graph_state::ready
            || record->serve_from.load() != 0))
      record.reset();
  }
  if (early) {
    if (record && record == placed_for) {
      walked.record = std::move(record);
      return early;
    }
    early.reset();  // placed on another structure: a lost bet
    streak.needed = std::min(streak.needed * 2, most_needed);
  }
  if (!record)
    return nullptr;
  auto bet = cuda::bet_before_engine(record->id, record->compiled->ir, walk.nodes, config,
                                     walk_began);
  if (bet)
    walked.record = std::move(record);
  return bet;
}

/// Whether Engine::execute would start the backward from `inputs` as they
/// are: its check of them raises, or casts or sums one to its edge's
/// metadata, for the stock engine to do.
bool starts_as_given(const std::vector<Edge>& roots, const torch::autograd::variable_list& inputs) {
  auto checked = inputs;
  try {
    torch::autograd::validate_outputs(roots, checked, [](const std::string& why) { return why; });
  } catch (const c10::Error&) {
    return false;
  }
  return std::equal(checked.begin(), checked.end(), inputs.begin(),
                    [](const at::Tensor& a, const at::Tensor& b) { return a.is_same(b); });
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
  walked.root.reset();
  walked.record.reset();
}

std::optional<torch::autograd::variable_list>
early_bet_scope::serve(const std::vector<Edge>& roots, const torch::autograd::variable_list& inputs,
                       bool keep_graph, bool accumulate_grad, const std::vector<Edge>& outputs) {
  auto streak_length = std::exchange(streak.length, 0);
  if (!pending || !walked.record || keep_graph || !accumulate_grad || !outputs.empty())
    return std::nullopt;
  const auto& config = *walked.policy->config;
  if (config.nan_check.enabled || !starts_as_given(roots, inputs))
    return std::nullopt;
  auto& record = *walked.record;
  auto& stats = engine_state::instance().stats;
  running_plan running(record);
  c10::AutoGradMode no_grad(false);  // as the stock engine runs a backward without create_graph
  std::optional<cuda::bet_served> served;
  try {
    served = cuda::serve_bet(pending, {record.id, record.compiled->ir, walked.walk.nodes, config});
    if (!served)
      return std::nullopt;
    join_caller_stream(served->stream);
  } catch (...) {
    stats.raised_backwards.fetch_add(1, std::memory_order_relaxed);
    stats.backwards.fetch_add(1, std::memory_order_relaxed);
    throw;
  }
  if (streak.record.expired())  // reset(), or its plan evicted: start afresh
    streak.needed = 2;
  streak.length = streak.record.lock() == walked.record ? streak_length + 1 : 1;
  streak.record = walked.record;
  streak.policy = walked.policy;
  streak.head_type =
      roots.size() == 1 && roots[0].function ? &typeid(*roots[0].function) : nullptr;
  streak.stream = served->stream;
  record.hits.fetch_add(1, std::memory_order_relaxed);
  stats.cache_hits.fetch_add(1, std::memory_order_relaxed);
  stats.plan_backwards.fetch_add(1, std::memory_order_relaxed);
  stats.backwards.fetch_add(1, std::memory_order_relaxed);
  return std::move(served->results);
}

cuda::early_bet take_early_bet() noexcept {
  return std::move(pending);
}

bool adopt_walk(const serving_policy& policy, torch::autograd::Node& root,
                capture::graph_walk& into) noexcept {
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

} // namespace gradd::engine
