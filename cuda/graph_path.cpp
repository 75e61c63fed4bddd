// The CUDA graph path of a plan hit (see graph_path.hpp).
//
// Per backward: one pass over the nodes for their stream (a CPU graph stops
// here), the lift and its shape key (graph_hit.cpp), and the structure's
// published table (Note [Published graphs]). Then the graph of that key
// replays, or, under the structure's lock, the policy decides whether this
// backward is recorded for a capture.

#include "cuda/graph_path.hpp"

#include "cuda/device_seeds.hpp"
#include "cuda/graph_cache.hpp"
#include "cuda/graph_hit.hpp"
#include "cuda/stream_actor.hpp"
#include "execute/plan_runner.hpp"
#include "functional/graph.hpp"

#include <torch/csrc/autograd/graph_task.h>
#include <torch/csrc/dynamo/compiled_autograd.h>

#include <algorithm>

namespace gradd::cuda {

namespace {

namespace ca = torch::dynamo::autograd;
using torch::autograd::variable_list;

hit_call hit_of(const graph_call& c) {
  return {c.structure, c.table, c.nodes, c.config, c.entered, c.task.keep_graph_};
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
      s.publish();
      return false;
    }
    s.seen.emplace(shape, 1);
    return false;
  }
  return ++seen->second >= 2;
}

/// Whether a backward of `shape`, which has no graph, is recorded for one
/// (the policy, the memory limit, retain_graph, a capture out of memory
/// not yet due for retry); if so marks the shape as being captured and
/// returns the inputs its graph copies. Call with `s.mutex` held.
std::optional<std::vector<uint32_t>> claim_capture(structure_graphs& s, uint64_t shape,
                                                   const graph_call& c) {
  if (auto oom = s.out_of_memory.find(shape); oom != s.out_of_memory.end()) {
    if (std::chrono::steady_clock::now() < oom->second)
      return std::nullopt;
    s.out_of_memory.erase(oom);  // memory may have come free since
  }
  // Recording swaps the nodes' saved variables on the stream actor's
  // thread, and a graph kept for another backward (retain_graph) may run
  // again meanwhile: seen on a Hopper GPU as the next backward finding them
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
  // The saved variables are kept (the request releases them once
  // recorded), and what the nodes the graph is cut at return is recorded as
  // they ran (Note [Piecewise graphs]).
  execute::output_tap tap;
  tap.keep_saved_variables = true;
  for (uint32_t i = 0; i < c.table.nodes.size(); ++i)
    tap.wanted.push_back(c.nodes[i] ? functional::cut_at(c.table.nodes[i], *c.nodes[i])
                                    : functional::cut_at(c.table.nodes[i]));
  bool cuts = std::find(tap.wanted.begin(), tap.wanted.end(), true) != tap.wanted.end();
  if (cuts)
    tap.outputs.resize(tap.wanted.size());
  try {
    c.run_plan(&tap);
  } catch (...) {
    std::lock_guard lock(s.mutex);
    s.shapes.erase(shape);
    throw;
  }
  request->structure = c.structure;
  request->shape = shape;
  request->root = c.root;
  request->task = c.task.shared_from_this();
  request->lifted = std::move(lifted);
  request->cut_outputs = std::move(tap.outputs);
  request->num_outputs = c.outputs.size();
  request->passes = c.config.passes.effective_pipeline();
  request->delay_ms = c.config.compile.delay_ms;
  request->max_graphs = c.config.cuda_graphs.max_graphs;
  request->retry_after = std::chrono::milliseconds(c.config.fallback.retry_after_ms);
  request->copied = std::move(copied);
  request->level = c.config.logging.level;
  if (request_capture(s, std::move(request))) {
    graph_cache::instance().counters.recordings.fetch_add(1, std::memory_order_relaxed);
  } else {
    std::lock_guard lock(s.mutex);
    s.shapes.erase(shape);
  }
  return std::move(c.task.captured_vars_);
}

} // namespace

std::optional<variable_list> serve_from_graph(const graph_call& c) {
  // Dropped unconfirmed (a lost bet) wherever this backward leaves the graphs.
  auto placed = std::move(c.bet);
  const auto& policy = c.config.cuda_graphs;
  if (!policy.enabled || policy.mode == graph_shape_policy::dynamic_shapes)
    return std::nullopt;
  auto stream = single_stream(c.table, c.nodes);
  if (!stream || stream_capturing(*stream))
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
  // Read once per backward, let go before the replay: it holds every graph
  // of the structure (Note [Published graphs]).
  auto table = structure->published();
  if (table->plan_only)
    return std::nullopt;
  if (!structure->nodes_vetted.load(std::memory_order_acquire)) {
    if (auto hooked = hooks_inside_graph(c.table)) {
      keep_on_plans(*structure, hit, *hooked);
      return std::nullopt;
    }
    if (auto at = python_node(c.table, c.nodes)) {
      keep_on_plans(*structure, hit,
                    "it runs a Python autograd.Function (node " + std::to_string(*at)
                        + ") whose gradient it returns");
      return std::nullopt;
    }
    auto attention = attention_nodes(c.nodes);
    auto cuts = cut_count(c.table);
    std::lock_guard lock(structure->mutex);
    if (!structure->nodes_vetted.load(std::memory_order_relaxed)) {
      structure->attention_nodes = std::move(attention);
      structure->table_cuts = cuts;
      structure->calls_live.store(calls_nodes_live(c.table), std::memory_order_relaxed);
      structure->nodes_vetted.store(true, std::memory_order_release);
    }
  }
  // Attention with dropout cuts the graph too, a backward with it off not.
  if (auto cuts = structure->table_cuts + with_dropout(c.nodes, structure->attention_nodes);
      cuts > policy.max_cuts) {
    keep_on_plans(*structure, hit,
                  "its graph would be cut at " + std::to_string(cuts)
                      + " nodes with hooks, Python Functions or attention with dropout"
                        " (cuda_graphs.max_cuts: "
                      + std::to_string(policy.max_cuts) + ")");
    return std::nullopt;
  }

  hit_times times{std::chrono::steady_clock::now(), {}};
  if (!weighed && policy.early_launch)
    bet = graph_to_bet_on(*structure, *table, {c.nodes, c.table});
  if (bet && !early)
    early = bet->launch_early(c10::cuda::CUDAStream(c10::cuda::CUDAStream::UNCHECKED, *stream),
                              {c.nodes, c.table});
  times.lifting = std::chrono::steady_clock::now();
  std::string why;
  auto lifted = lift_inputs(hit, *structure, why);
  if (!lifted) {
    if (!why.empty())
      keep_on_plans(*structure, hit, why);
    return std::nullopt;
  }
  auto shape = lifted->shape;

  structure->note_shape(shape);
  std::shared_ptr<backward_graph> graph;
  bool probed = true;
  std::optional<std::vector<uint32_t>> copied;
  if (auto it = table->shapes.find(shape); it != table->shapes.end()) {
    graph = it->second.graph;
    probed = it->second.probed;
  }
  table.reset();
  if (!graph) {
    // A miss: the shape is captured now, or may be (Note [Published graphs]).
    std::lock_guard lock(structure->mutex);
    if (auto it = structure->shapes.find(shape); it != structure->shapes.end()) {
      if (!it->second.graph) {
        cache.counters.during_capture.fetch_add(1, std::memory_order_relaxed);
        return std::nullopt;
      }
      graph = it->second.graph;  // published since the table was read
      probed = it->second.probed;
    } else if (!(copied = claim_capture(*structure, shape, c))) {
      return std::nullopt;
    }
  }
  if (graph)
    structure->mark_used(*graph);
  if (graph != bet)
    early.reset();  // a lost bet: its outputs are abandoned
  if (graph) {
    auto results = replay_hit(hit, *structure, shape, graph, lifted->call->tensor_args.inputs,
                              *stream, times, probed, std::move(early));
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

void add_graph_statistics(statistics& s) {
  const auto& counters = graph_cache::instance().counters;
  s.graph_backwards = counters.graph_backwards.load();
  s.piecewise_backwards = counters.piecewise_backwards.load();
  s.graph_eager_rests = counters.eager_rests.load();
  s.graphs = static_cast<uint64_t>(counters.graphs.load());
  s.graph_bytes = static_cast<uint64_t>(counters.bytes.load());
  s.graph_bound_bytes = static_cast<uint64_t>(counters.bound_bytes.load());
  s.graph_captures = counters.captures.load();
  s.graph_capture_failures = counters.capture_failures.load();
  s.graph_evictions = counters.evictions.load();
  s.graph_copy_on_writes = counters.copy_on_writes.load();
  s.graph_lent_elsewhere = counters.lent_elsewhere.load();
  s.graph_other_stream = counters.other_stream.load();
  s.graph_walk_ns = counters.walk_ns.load();
  s.graph_lift_ns = counters.lift_ns.load();
  s.graph_copy_ns = counters.copy_ns.load();
  s.graph_launch_ns = counters.launch_ns.load();
  s.graph_cuda_launch_ns = counters.cuda_launch_ns.load();
  s.graph_live_read_ns = counters.live_read_ns.load();
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

void add_graph_coverage(graph_statistics& g) {
  auto structure = graph_cache::instance().find(g.id);
  if (!structure)
    return;
  g.graph_backwards = structure->graph_backwards.load(std::memory_order_relaxed);
  std::lock_guard lock(structure->mutex);
  g.plans_only = structure->plan_only;
  for (const auto& [shape, slot] : structure->shapes)
    if (slot.graph) {
      g.cuda_graphs += 1;
      g.graph_kernels += slot.graph->node_count();
      g.live_nodes = static_cast<uint32_t>(slot.graph->live_nodes());
      g.graph_pieces = static_cast<uint32_t>(slot.graph->pieces());
      g.cuts = slot.graph->cut_names();
    }
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
