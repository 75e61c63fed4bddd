// The CUDA graph path of a plan hit (see graph_path.hpp).
//
// Per backward: one pass over the nodes for their stream (a CPU graph stops
// here), the structure's graphs under one short lock, a lift of the live
// inputs through `compiled_args` (the same order functional capture lifts
// in), and a key of everything a graph specializes on: each node's
// specialization key (its non-tensor attributes), the lifted sizes and
// scalars, and each lifted tensor's dtype, device, sizes and strides.
// Then the graph of that key replays, or the policy decides whether this
// backward is recorded for a capture.

#include "cuda/graph_path.hpp"

#include "compiler/exec_info.hpp"
#include "config/log.hpp"
#include "cuda/backward_graph.hpp"
#include "cuda/graph_cache.hpp"
#include "cuda/shape_key.hpp"
#include "cuda/shape_probe.hpp"
#include "cuda/stream_actor.hpp"
#include "engine/functional/graph.hpp"

#include <ATen/DeviceAccelerator.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/csrc/dynamo/compiled_autograd.h>

#include <algorithm>
#include <iterator>
#include <string_view>

namespace gradd::cuda {

namespace {

namespace ca = torch::dynamo::autograd;
namespace functional = engine::functional;
using torch::autograd::Node;
using torch::autograd::variable_list;

/// The one CUDA stream every node that runs is on, if there is one: each
/// node's stream() (the stream of its first input on the accelerator), with
/// the accelerator looked up once instead of once a node.
std::optional<c10::Stream> single_stream(const compiler::graph& table,
                                         const std::vector<Node*>& nodes) {
  if (at::getAccelerator() != c10::DeviceType::CUDA)
    return std::nullopt;
  std::optional<c10::Stream> stream;
  for (uint32_t i = 0; i < table.nodes.size(); ++i) {
    const auto& info = table.nodes[i];
    if (info.is_root || !compiler::should_execute(info))
      continue;
    const Node& node = *nodes[i];
    std::optional<c10::Stream> s;
    for (uint32_t k = 0; k < node.num_inputs() && !s; ++k)
      if (node.input_metadata(k).device().type() == c10::DeviceType::CUDA)
        s = node.input_metadata(k).stream();
    if (!s || (stream && *stream != *s))
      return std::nullopt;
    stream = s;
  }
  return stream;
}

/// Whether any node that runs has hooks: they run between node calls,
/// which a graph does not have.
bool has_hooks(const compiler::graph& table) {
  for (const auto& info : table.nodes)
    if (compiler::should_execute(info) && info.hooks != compiler::hook_counts{})
      return true;
  return false;
}

/// What a graph hit needs of its backward, from either entry: the hook's
/// graph_call or a bet served before the engine (bet_call).
struct hit_call {
  uint64_t structure;
  const compiler::graph& table;
  const std::vector<Node*>& nodes;
  const settings& config;
  std::chrono::steady_clock::time_point entered;
  bool keep_graph;
};

hit_call hit_of(const graph_call& c) {
  return {c.structure, c.table, c.nodes, c.config, c.entered, c.task.keep_graph_};
}

void keep_on_plans(structure_graphs& s, const hit_call& c, const std::string& why) {
  {
    std::lock_guard lock(s.mutex);
    if (!s.plan_only.empty())
      return;
    s.plan_only = why;
  }
  log(c.config.logging.level, log_level::info,
      "graph " + std::to_string(c.structure) + " stays on plans: " + why);
}

/// The dynamic-shape policy for a shape without a graph; call with the
/// structure's lock held.
bool wants_capture(structure_graphs& s, uint64_t shape, const settings::cuda_graphs_section& p) {
  if (p.mode == graph_shape_policy::static_shapes)
    return true;
  auto seen = s.seen.find(shape);
  if (seen == s.seen.end()) {
    if (s.seen.size() >= p.dynamic_after) {
      s.plan_only = "its shapes keep changing (" + std::to_string(s.seen.size())
                    + " seen, cuda_graphs.dynamic_after)";
      return false;
    }
    s.seen.emplace(shape, 1);
    return false;
  }
  return ++seen->second >= 2;
}

/// The graph a backward of `s` bets on (Note [Early launch]), or null: with
/// one graph, its shape's once two backwards in a row had it; with several,
/// the one its probe names (Note [Shape probe]). Takes the structure's lock.
std::shared_ptr<backward_graph> graph_to_bet_on(structure_graphs& s,
                                                const backward_nodes& backward) {
  {
    std::lock_guard lock(s.mutex);
    if (!s.plan_only.empty())
      return nullptr;
    if (!s.bets_by_probe()) {
      auto it = s.steady ? s.shapes.find(s.last_shape) : s.shapes.end();
      return it != s.shapes.end() ? it->second.graph : nullptr;
    }
  }
  auto probe = probe_key(backward);
  if (!probe)
    return nullptr;
  std::lock_guard lock(s.mutex);
  return s.graph_probed(*probe);
}

/// After the first replay of `shape`'s graph: learns its probe's key
/// (Note [Shape probe]).
void learn_probe(structure_graphs& s, uint64_t shape, const backward_nodes& backward) {
  auto probe = probe_key(backward);
  std::lock_guard lock(s.mutex);
  s.learn_probe(shape, probe);
}

/// A graph the driver would not point at moved inputs (a kernel node whose
/// shared memory its kernel does not allow now: Known gaps, design.md)
/// cannot follow them any more: the shape is captured again, copying the
/// inputs that kernel reads.
void capture_again_copying(const hit_call& c, structure_graphs& s, uint64_t shape,
                           const std::shared_ptr<backward_graph>& graph, const std::string& why) {
  size_t copied;
  {
    std::lock_guard lock(s.mutex);
    auto it = s.shapes.find(shape);
    if (it == s.shapes.end() || it->second.graph != graph)
      return;  // another backward dropped it first
    s.shapes.erase(it);
    auto& inputs = s.copied_inputs[shape];
    std::vector<uint32_t> both;
    std::set_union(inputs.begin(), inputs.end(), graph->refused_inputs().begin(),
                   graph->refused_inputs().end(), std::back_inserter(both));
    inputs = std::move(both);
    copied = inputs.size();
  }
  log(c.config.logging.level, log_level::info,
      "graph " + std::to_string(c.structure) + ": the CUDA driver refused a replay's new arguments ("
          + why + "); this shape's next graph copies the " + std::to_string(copied)
          + " inputs that kernel reads");
}

/// What the stock engine does after each node it ran, unless asked to keep
/// the graph: lets go of its saved variables. A second backward then raises
/// as on the stock engine, and the activations go back to the allocator
/// before backward() returns, not when the caller drops the graph. The
/// replay may still be reading them, as the stock engine's kernels may be
/// when it lets go: the caching allocator hands their memory only to later
/// work on the stream they were made on, the one the backward runs on.
void release_saved_variables(const hit_call& c) {
  auto start = std::chrono::steady_clock::now();
  for (uint32_t i = 0; i < c.table.nodes.size(); ++i)
    if (!c.table.nodes[i].is_root && compiler::should_execute(c.table.nodes[i]))
      c.nodes[i]->release_variables();
  graph_cache::instance().counters.hand_out_ns.fetch_add(
      nanoseconds_between(start, std::chrono::steady_clock::now()), std::memory_order_relaxed);
}

/// How many graphs a structure may lose to a parameter at another address
/// before it stays on plans. One replaced parameter (`set_data`, a move) is
/// recaptured; parameters that move every backward (two models of one
/// structure trained in turn, storage allocated anew each step) would have
/// every backward recorded and every graph dropped at its next replay.
constexpr uint32_t max_parameter_moves = 3;

/// When a graph hit finished its walk and began its lift; an early launch
/// (Note [Early launch]) lies between the two.
struct hit_times {
  std::chrono::steady_clock::time_point walked;
  std::chrono::steady_clock::time_point lifting;
};

/// Replays `graph` for a backward whose inputs, lifted, are `live`, on
/// `stream`; nullopt, the plan's to serve, where the graph does not fit
/// them or the driver refused to point it at them.
std::optional<variable_list> replay(const hit_call& c, structure_graphs& s, uint64_t shape,
                                    const std::shared_ptr<backward_graph>& graph,
                                    const std::vector<at::Tensor>& live, c10::Stream stream,
                                    hit_times times, bool probed,
                                    std::optional<backward_graph::early_launch> early) {
  auto& counters = graph_cache::instance().counters;
  counters.walk_ns.fetch_add(nanoseconds_between(c.entered, times.walked),
                             std::memory_order_relaxed);
  counters.launch_ns.fetch_add(nanoseconds_between(times.walked, times.lifting),
                               std::memory_order_relaxed);
  counters.lift_ns.fetch_add(nanoseconds_between(times.lifting, std::chrono::steady_clock::now()),
                             std::memory_order_relaxed);
  switch (graph->fit_of(live)) {
    case backward_graph::fit::fits:
      break;
    case backward_graph::fit::parameter_moved: {
      // A parameter was replaced: this shape is captured again.
      bool keeps_moving;
      {
        std::lock_guard lock(s.mutex);
        if (auto it = s.shapes.find(shape); it != s.shapes.end() && it->second.graph == graph)
          s.shapes.erase(it);
        keeps_moving = ++s.parameter_moves >= max_parameter_moves;
      }
      if (keeps_moving)
        keep_on_plans(s, c, "its parameters moved " + std::to_string(max_parameter_moves)
                                + " times (two models of one structure trained in turn?)");
      return std::nullopt;
    }
    case backward_graph::fit::different:
      return std::nullopt;
  }
  backward_nodes backward{c.nodes, c.table};
  auto results = graph->replay(live, c10::cuda::CUDAStream(c10::cuda::CUDAStream::UNCHECKED, stream),
                               c.config.cuda_graphs.hand_out, std::move(early),
                               c.config.cuda_graphs.early_launch ? &backward : nullptr);
  if (!results) {
    if (const auto* why = graph->rebind_refusal())
      capture_again_copying(c, s, shape, graph, *why);
    return std::nullopt;
  }
  counters.graph_backwards.fetch_add(1, std::memory_order_relaxed);
  if (!probed && c.config.cuda_graphs.early_launch)
    learn_probe(s, shape, backward);  // lifts the probe alone: before its variables go
  if (!c.keep_graph)
    release_saved_variables(c);
  return results;
}

/// A backward's inputs lifted for the graph path, and their shape key.
struct lifted_inputs {
  std::shared_ptr<ca::AutogradCompilerCall> call;
  uint64_t shape = 0;
};

/// Whether `error`, raised by a lift, is the caller's mistake that the
/// stock engine raises too: saved variables gone (a second backward
/// without retain_graph) or changed in place since the forward.
bool callers_mistake(std::string_view error) {
  return error.find(torch::autograd::ERR_BACKWARD_TWICE) != std::string_view::npos
         || error.find("modified by an inplace operation") != std::string_view::npos;
}

/// Lifts the inputs of `c`'s backward (the order functional capture lifts
/// in) and keys their shape. Nullopt where no graph can serve it, with
/// `why` saying why its structure should stay on plans; `why` empty where
/// the caller's mistake is to blame (callers_mistake: the plan raises the
/// stock engine's error, and the structure keeps its graphs).
std::optional<lifted_inputs> lift_inputs(const hit_call& c, std::string& why) {
  lifted_inputs lifted{std::make_shared<ca::AutogradCompilerCall>(ca::SizeInput::STATIC)};
  std::optional<uint64_t> shape;
  try {
    shape = shape_key(*lifted.call, functional::lift_nodes_hashed(*lifted.call, c.nodes, c.table));
  } catch (const std::exception& e) {
    if (!callers_mistake(e.what()))
      why = e.what();
    return std::nullopt;
  }
  if (!shape) {
    why = "a lifted scalar is neither int, float nor bool";
    return std::nullopt;
  }
  for (const auto& t : lifted.call->tensor_args.inputs)
    if (t.defined() && !t.is_cuda()) {
      why = "a saved tensor is on the CPU";
      return std::nullopt;
    }
  lifted.shape = *shape;
  return lifted;
}

/// Notes a backward of `shape` lifted for `s`'s graphs: whether its loop is
/// steady (Note [Early launch]). Call with `s.mutex` held.
void note_shape(structure_graphs& s, uint64_t shape) {
  s.steady = shape == s.last_shape;
  s.last_shape = shape;
}

/// Whether a backward of `shape`, which has no graph, is recorded for one
/// (the policy, the memory limit, retain_graph); if so marks the shape as
/// being captured and returns the inputs its graph copies. Call with
/// `s.mutex` held.
std::optional<std::vector<uint32_t>> claim_capture(structure_graphs& s, uint64_t shape,
                                                   const graph_call& c) {
  // Recording swaps the nodes' saved variables on the stream actor's
  // thread, and a graph kept for another backward (retain_graph) may run
  // again meanwhile: seen on the H200 as the next backward finding them
  // gone. Such a shape is captured from a backward that frees them.
  const auto& policy = c.config.cuda_graphs;
  if (!s.plan_only.empty() || c.task.keep_graph_ || !wants_capture(s, shape, policy))
    return std::nullopt;
  if (graph_cache::instance().counters.bytes.load() >= int64_t{policy.memory_limit_mb} << 20)
    return std::nullopt;
  s.shapes[shape];  // being captured
  auto it = s.copied_inputs.find(shape);
  return it != s.copied_inputs.end() ? it->second : std::vector<uint32_t>{};
}

/// Serves the backward with its plan, keeping its saved variables for the
/// recording, then asks the stream actor for a graph of this shape (one
/// that copies the inputs `copied`, reading the others where they live).
variable_list plan_then_capture(const graph_call& c,
                                const std::shared_ptr<structure_graphs>& graphs, uint64_t shape,
                                std::vector<uint32_t> copied, c10::Stream stream,
                                std::shared_ptr<ca::AutogradCompilerCall> lifted) {
  auto& s = *graphs;
  functional::graph backward;
  backward.walk.nodes = c.nodes;
  backward.ir = c.table;  // the node table, without the plan's ops
  backward.ir.ops.clear();
  backward.ir.num_values = 1;
  auto request = std::make_shared<capture_request>(
      c10::cuda::CUDAStream(c10::cuda::CUDAStream::UNCHECKED, stream), std::move(backward));
  request->keep_graph = c.task.keep_graph_;
  c.task.keep_graph_ = true;  // the request releases them once recorded
  try {
    c.run_plan();
  } catch (...) {
    c.task.keep_graph_ = request->keep_graph;
    std::lock_guard lock(s.mutex);
    s.shapes.erase(shape);
    throw;
  }
  c.task.keep_graph_ = request->keep_graph;
  request->plan_done = std::make_shared<at::cuda::CUDAEvent>();
  request->plan_done->record(request->stream);
  request->structure = c.structure;
  request->graphs = graphs;
  request->shape = shape;
  request->root = c.root;
  request->task = c.task.shared_from_this();
  request->lifted = std::move(lifted);
  request->num_outputs = c.outputs.size();
  request->passes = c.config.passes.effective_pipeline();
  request->delay_ms = c.config.compile.delay_ms;
  request->max_graphs = c.config.cuda_graphs.max_graphs;
  request->copied = std::move(copied);
  request->level = c.config.logging.level;
  if (request_capture(std::move(request))) {
    graph_cache::instance().counters.recordings.fetch_add(1, std::memory_order_relaxed);
  } else {
    std::lock_guard lock(s.mutex);
    s.shapes.erase(shape);
  }
  return std::move(c.task.captured_vars_);
}

} // namespace

struct placed_bet {
  uint64_t structure = 0;
  std::shared_ptr<backward_graph> graph;  ///< null where none was launched
  std::optional<backward_graph::early_launch> launch;
  /// Where it launched: a bet before the walk takes the stream of the
  /// backwards before, which this one need not run on.
  std::optional<c10::Stream> stream;
};

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
placed_bet place_bet(uint64_t structure, const backward_nodes& backward, c10::Stream stream,
                     std::chrono::steady_clock::time_point walk_began) {
  auto start = std::chrono::steady_clock::now();
  auto& cache = graph_cache::instance();
  auto graph = graph_to_bet_on(*cache.structure(structure), backward);
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
  if (!stream || has_hooks(table))
    return nullptr;
  return early_bet(new placed_bet(place_bet(structure, {nodes, table}, *stream, walk_began)));
}

early_bet bet_before_walk(uint64_t structure, const compiler::graph& table,
                          const std::vector<Node*>& head, const settings& config,
                          c10::Stream stream) {
  if (!bets_early(config))
    return nullptr;
  auto bet = place_bet(structure, {head, table}, stream, std::chrono::steady_clock::now());
  if (!bet.launch)
    return nullptr;
  graph_cache::instance().counters.bets_before_walk.fetch_add(1, std::memory_order_relaxed);
  return early_bet(new placed_bet(std::move(bet)));
}

std::optional<variable_list> serve_from_graph(const graph_call& c) {
  // Dropped unconfirmed (a lost bet) wherever this backward leaves the graphs.
  auto placed = std::move(c.bet);
  const auto& policy = c.config.cuda_graphs;
  if (!policy.enabled || policy.mode == graph_shape_policy::dynamic_shapes)
    return std::nullopt;
  auto stream = single_stream(c.table, c.nodes);
  if (!stream)
    return std::nullopt;
  auto hit = hit_of(c);
  auto& cache = graph_cache::instance();
  auto structure = cache.structure(c.structure);
  std::shared_ptr<backward_graph> bet;
  std::optional<backward_graph::early_launch> early;
  bool weighed = placed && placed->structure == c.structure;  // no need to look again
  if (!weighed) {
    placed.reset();  // on another structure: lost, its turn in the pool let go
  } else {
    bet = std::move(placed->graph);
    if (placed->stream == stream)
      early = std::move(placed->launch);
    else
      placed->launch.reset();  // on another stream: lost, and launched again below on this one
  }
  {
    std::lock_guard lock(structure->mutex);
    if (!structure->plan_only.empty())
      return std::nullopt;
  }
  if (has_hooks(c.table)) {
    keep_on_plans(*structure, hit, "it has hooks");
    return std::nullopt;
  }

  hit_times times{std::chrono::steady_clock::now(), {}};
  if (!weighed && policy.early_launch)
    bet = graph_to_bet_on(*structure, {c.nodes, c.table});
  if (bet && !early)
    early = bet->launch_early(c10::cuda::CUDAStream(c10::cuda::CUDAStream::UNCHECKED, *stream),
                              {c.nodes, c.table});
  times.lifting = std::chrono::steady_clock::now();
  std::string why;
  auto lifted = lift_inputs(hit, why);
  if (!lifted) {
    if (!why.empty())
      keep_on_plans(*structure, hit, why);
    return std::nullopt;
  }
  auto shape = lifted->shape;

  std::shared_ptr<backward_graph> graph;
  bool probed = true;
  std::optional<std::vector<uint32_t>> copied;
  {
    std::lock_guard lock(structure->mutex);
    note_shape(*structure, shape);
    if (auto it = structure->shapes.find(shape); it != structure->shapes.end()) {
      if (!it->second.graph) {
        cache.counters.during_capture.fetch_add(1, std::memory_order_relaxed);
        return std::nullopt;
      }
      graph = it->second.graph;
      probed = it->second.probed;
      it->second.last_used = ++structure->clock;
    } else if (!(copied = claim_capture(*structure, shape, c))) {
      return std::nullopt;
    }
  }
  if (graph != bet)
    early.reset();  // a lost bet: its outputs are abandoned
  if (graph) {
    auto results = replay(hit, *structure, shape, graph, lifted->call->tensor_args.inputs, *stream,
                          times, probed, std::move(early));
    if (results) {
      c.task.leaf_streams.emplace(*stream);
      return results;
    }
    // A graph dropped by its replay (a parameter replaced, new arguments
    // refused) is replaced from this backward; one that did not fit it stays.
    std::lock_guard lock(structure->mutex);
    if (structure->shapes.count(shape) || !(copied = claim_capture(*structure, shape, c)))
      return std::nullopt;
  }
  return plan_then_capture(c, structure, shape, std::move(*copied), *stream,
                           std::move(lifted->call));
}

std::optional<bet_served> serve_bet(early_bet& bet, const bet_call& c) {
  if (!bet || !bet->launch || bet->structure != c.structure)
    return std::nullopt;
  auto stream = single_stream(c.table, c.nodes);
  if (!stream || stream != bet->stream)
    return std::nullopt;
  hit_call hit{c.structure, c.table, c.nodes, c.config, std::chrono::steady_clock::now(),
               /*keep_graph=*/false};
  hit_times times{hit.entered, hit.entered};  // the bet counted its walk and launch
  std::string why;
  auto lifted = lift_inputs(hit, why);
  if (!lifted)
    return std::nullopt;
  auto structure = graph_cache::instance().structure(c.structure);
  bool probed;
  {
    std::lock_guard lock(structure->mutex);
    auto it = structure->shapes.find(lifted->shape);
    if (!structure->plan_only.empty() || it == structure->shapes.end()
        || it->second.graph != bet->graph)
      return std::nullopt;  // another shape: the hook's graph path sorts it out
    note_shape(*structure, lifted->shape);
    probed = it->second.probed;
    it->second.last_used = ++structure->clock;
  }
  auto placed = std::move(bet);
  auto results = replay(hit, *structure, lifted->shape, placed->graph,
                        lifted->call->tensor_args.inputs, *stream, times, probed,
                        std::move(placed->launch));
  if (!results)
    return std::nullopt;
  graph_cache::instance().counters.hits_before_engine.fetch_add(1, std::memory_order_relaxed);
  return bet_served{std::move(*results), *stream};
}

void add_graph_statistics(statistics& s) {
  const auto& counters = graph_cache::instance().counters;
  s.graph_backwards = counters.graph_backwards.load();
  s.graphs = static_cast<uint64_t>(counters.graphs.load());
  s.graph_bytes = static_cast<uint64_t>(counters.bytes.load());
  s.graph_bound_bytes = static_cast<uint64_t>(counters.bound_bytes.load());
  s.graph_captures = counters.captures.load();
  s.graph_capture_failures = counters.capture_failures.load();
  s.graph_evictions = counters.evictions.load();
  s.graph_copy_on_writes = counters.copy_on_writes.load();
  s.graph_walk_ns = counters.walk_ns.load();
  s.graph_lift_ns = counters.lift_ns.load();
  s.graph_copy_ns = counters.copy_ns.load();
  s.graph_launch_ns = counters.launch_ns.load();
  s.graph_cuda_launch_ns = counters.cuda_launch_ns.load();
  s.graph_hand_out_ns = counters.hand_out_ns.load();
  s.graph_recordings = counters.recordings.load();
  s.graph_rewrites = counters.rewrites.load();
  s.graph_early_launches = counters.early_launches.load();
  s.graph_early_misses = counters.early_misses.load();
  s.graph_bets_before_engine = counters.bets_before_engine.load();
  s.graph_hits_before_engine = counters.hits_before_engine.load();
  s.graph_bets_before_walk = counters.bets_before_walk.load();
  s.backwards_during_capture = counters.during_capture.load();
}

void reset_graph_statistics() {
  graph_cache::instance().counters.reset();
}

void drop_graphs() {
  graph_cache::instance().clear();
}

bool wait_graph_captures(std::chrono::milliseconds timeout) {
  return wait_captures(timeout);
}

bool drain_graph_captures(std::chrono::milliseconds grace) {
  return drain_captures(grace);
}

} // namespace gradd::cuda
