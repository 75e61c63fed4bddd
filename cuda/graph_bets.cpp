// Graphs launched before libtorch's engine prepared their backward, and
// the backwards served from them there (see graph_path.hpp; Notes [Bets
// before the engine] and [Bets before the walk], engine/early_bet.hpp).

#include "cuda/graph_cache.hpp"
#include "cuda/graph_hit.hpp"
#include "cuda/graph_path.hpp"

#include <torch/csrc/dynamo/compiled_autograd.h>

namespace gradd::cuda {

using torch::autograd::Node;
using torch::autograd::variable_list;

void placed_bet_deleter::operator()(placed_bet* bet) const noexcept {
  delete bet;
}

namespace {

/// Whether the policy lets a backward launch its graph before its lift.
bool bets_early(const settings& config) {
  const auto& policy = config.cuda_graphs;
  return policy.enabled && policy.mode != graph_shape_policy::dynamic_shapes
         && policy.early_launch;
}

/// The bet of structure `structure` for `backward`, launched on `stream`
/// (Note [Early launch]), and counted; its graph null where it launched
/// none. The walk before it began at `walk_began`.
placed_bet place_bet(uint64_t structure, structure_graphs& graphs, const backward_nodes& backward,
                     c10::Stream stream, std::chrono::steady_clock::time_point walk_began) {
  auto start = std::chrono::steady_clock::now();
  auto& cache = graph_cache::instance();
  auto graph = graph_to_bet_on(graphs, *graphs.published(), backward);
  std::optional<backward_graph::early_launch> launch;
  if (graph)
    launch = graph->launch_early(c10::cuda::CUDAStream(c10::cuda::CUDAStream::UNCHECKED, stream),
                                 backward);
  if (!launch)
    return {structure, nullptr, std::nullopt, std::nullopt};
  cache.counters.bets_before_engine.fetch_add(1, std::memory_order_relaxed);
  cache.counters.walk_ns.fetch_add(nanoseconds_between(walk_began, start),
                                   std::memory_order_relaxed);
  cache.counters.launch_ns.fetch_add(nanoseconds_between(start, std::chrono::steady_clock::now()),
                                     std::memory_order_relaxed);
  return {structure, std::move(graph), std::move(launch), stream};
}

} // namespace

early_bet bet_before_engine(uint64_t structure, const compiler::graph& table,
                            const std::vector<Node*>& nodes, const settings& config,
                            std::chrono::steady_clock::time_point walk_began) {
  if (!bets_early(config))
    return nullptr;
  auto stream = single_stream(table, nodes);
  if (!stream || stream_capturing(*stream))
    return nullptr;
  auto graphs = graph_cache::instance().structure(structure);
  if (graphs->calls_live.load(std::memory_order_relaxed))
    return nullptr;
  return early_bet(
      new placed_bet(place_bet(structure, *graphs, {nodes, table}, *stream, walk_began)));
}

early_bet bet_before_walk(uint64_t structure, const compiler::graph& table,
                          const std::vector<Node*>& head, const settings& config,
                          c10::Stream stream) {
  if (!bets_early(config) || stream_capturing(stream))
    return nullptr;
  auto graphs = graph_cache::instance().structure(structure);
  if (graphs->calls_live.load(std::memory_order_relaxed))
    return nullptr;
  auto bet = place_bet(structure, *graphs, {head, table}, stream, std::chrono::steady_clock::now());
  if (!bet.launch)
    return nullptr;
  graph_cache::instance().counters.bets_before_walk.fetch_add(1, std::memory_order_relaxed);
  return early_bet(new placed_bet(std::move(bet)));
}

std::optional<bet_served> serve_bet(early_bet& bet, const bet_call& c) {
  // A bet was placed only where the structure calls no node live.
  if (!bet || !bet->launch || bet->structure != c.structure)
    return std::nullopt;
  auto stream = single_stream(c.table, c.nodes);
  if (!stream || stream != bet->stream)
    return std::nullopt;
  hit_call hit{c.structure, c.table, c.nodes, c.config, std::chrono::steady_clock::now(),
               /*keep_graph=*/false};
  hit_times times{hit.entered, hit.entered};  // the bet counted its walk and launch
  std::string why;
  // A structure with a bet has graphs: its nodes were vetted before its capture.
  auto structure = graph_cache::instance().structure(c.structure);
  auto lifted = lift_inputs(hit, *structure, why);
  if (!lifted)
    return std::nullopt;
  bool probed;
  {
    // Let go before the replay: the table holds every graph of the structure.
    auto table = structure->published();
    auto it = table->shapes.find(lifted->shape);
    if (table->plan_only || it == table->shapes.end() || it->second.graph != bet->graph)
      return std::nullopt;  // another shape: the hook's graph path sorts it out
    probed = it->second.probed;
  }
  structure->note_shape(lifted->shape);
  structure->mark_used(*bet->graph);
  auto placed = std::move(bet);
  auto results = replay_hit(hit, *structure, lifted->shape, placed->graph,
                            lifted->call->tensor_args.inputs, *stream, times, probed,
                            std::move(placed->launch));
  if (!results)
    return std::nullopt;
  graph_cache::instance().counters.hits_before_engine.fetch_add(1, std::memory_order_relaxed);
  return bet_served{std::move(*results), *stream};
}

} // namespace gradd::cuda
