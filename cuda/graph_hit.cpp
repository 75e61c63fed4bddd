// What a graph hit does once its backward is known (see graph_hit.hpp):
// a lift of the live inputs through `compiled_args` (the same order
// functional capture lifts in) and a key of everything a graph specializes
// on (each node's specialization key, its non-tensor attributes; the
// lifted sizes and scalars; each lifted tensor's dtype, device, sizes and
// strides), then the replay of the graph of that key and what follows it.

#include "cuda/graph_hit.hpp"

#include "compiler/exec_info.hpp"
#include "config/log.hpp"
#include "cuda/device_seeds.hpp"
#include "cuda/graph_cache.hpp"
#include "cuda/shape_key.hpp"
#include "cuda/shape_probe.hpp"
#include "functional/graph.hpp"

#include <ATen/DeviceAccelerator.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/csrc/dynamo/compiled_autograd.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <string_view>
#include <typeinfo>

namespace gradd::cuda {

namespace {

namespace ca = torch::dynamo::autograd;
using torch::autograd::variable_list;

/// After the first replay of `shape`'s graph: learns its probe's key
/// (Note [Shape probe]).
void learn_probe(structure_graphs& s, uint64_t shape, const backward_nodes& backward) {
  auto probe = probe_key(backward);
  std::lock_guard lock(s.mutex);
  s.learn_probe(shape, probe);
  s.publish();
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
    s.publish();
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

/// Whether `error`, raised by a lift, is the caller's mistake that the
/// stock engine raises too: saved variables gone (a second backward
/// without retain_graph) or changed in place since the forward.
bool callers_mistake(std::string_view error) {
  return error.find(torch::autograd::ERR_BACKWARD_TWICE) != std::string_view::npos
         || error.find("modified by an inplace operation") != std::string_view::npos;
}

/// The name of the first node of `c` that runs and saved a tensor on the
/// CPU, each node lifted alone: what keeps its structure on plans, said once.
std::string holder_of_cpu_tensor(const hit_call& c) {
  for (uint32_t i = 0; i < c.table.nodes.size(); ++i) {
    if (!compiler::should_execute(c.table.nodes[i]))
      continue;
    ca::AutogradCompilerCall alone(ca::SizeInput::STATIC);
    try {
      functional::lift_node_hashed(alone, *c.nodes[i], c.table.nodes[i]);
    } catch (const std::exception&) {
      continue;
    }
    for (const auto& t : alone.tensor_args.inputs)
      if (t.defined() && !t.is_cuda() && !wrapped_scalar(t))
        return "in " + c.nodes[i]->name();
  }
  return "in a node lifted with the others";
}

} // namespace

std::optional<c10::Stream> single_stream(const compiler::graph& table,
                                         const std::vector<torch::autograd::Node*>& nodes) {
  if (at::getAccelerator() != c10::DeviceType::CUDA)
    return std::nullopt;
  std::optional<c10::Stream> stream;
  for (uint32_t i = 0; i < table.nodes.size(); ++i) {
    const auto& info = table.nodes[i];
    if (info.is_root || !compiler::should_execute(info))
      continue;
    const torch::autograd::Node& node = *nodes[i];
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

bool stream_capturing(c10::Stream stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  auto cuda_stream = c10::cuda::CUDAStream(c10::cuda::CUDAStream::UNCHECKED, stream).stream();
  if (cudaStreamIsCapturing(cuda_stream, &status) != cudaSuccess) {
    (void)cudaGetLastError();  // the legacy stream beside a global capture: as good as captured
    return true;
  }
  return status != cudaStreamCaptureStatusNone;
}

bool calls_nodes_live(const compiler::graph& table) {
  for (const auto& info : table.nodes)
    if (compiler::should_execute(info)
        && (info.hooks != compiler::hook_counts{} || functional::cut_at(info)))
      return true;
  return false;
}

size_t cut_count(const compiler::graph& table) {
  return static_cast<size_t>(
      std::count_if(table.nodes.begin(), table.nodes.end(),
                    [](const compiler::node_info& info) { return functional::cut_at(info); }));
}

std::optional<std::string> hooks_inside_graph(const compiler::graph& table) {
  constexpr size_t named = 4;  // the reason names this many, and counts the rest
  std::string names;
  size_t hooked = 0;
  for (uint32_t i = 0; i < table.nodes.size(); ++i) {
    const auto& info = table.nodes[i];
    // A leaf that only captures (autograd::grad's inputs) returns its
    // gradient through its tensor pre-hooks: from inside the graph.
    bool live = (info.is_accumulate_grad && info.needed && info.captures.empty())
                || functional::cut_at(info);
    if (!compiler::should_execute(info) || live || info.hooks == compiler::hook_counts{})
      continue;
    if (++hooked > named)
      continue;
    if (hooked > 1)
      names += ", ";
    names += std::to_string(i) + " (" + info.type_name.substr(info.type_name.rfind(':') + 1) + ")";
  }
  if (hooked == 0)
    return std::nullopt;
  if (hooked == 1)
    return "node " + names + " has hooks";
  if (hooked > named)
    names += " and " + std::to_string(hooked - named) + " more";
  return "nodes " + names + " have hooks";
}

std::optional<uint32_t> python_node(const compiler::graph& table,
                                    const std::vector<torch::autograd::Node*>& nodes) {
  // By the type's name: libtorch_python, which defines it, may be loaded
  // privately (RTLD_LOCAL), and gradd does not link it.
  static constexpr const char* py_node = "N5torch8autograd6PyNodeE";
  for (uint32_t i = 0; i < table.nodes.size(); ++i)
    if (compiler::should_execute(table.nodes[i]) && !functional::cut_at(table.nodes[i])
        && nodes[i] != nullptr && std::strcmp(typeid(*nodes[i]).name(), py_node) == 0)
      return i;
  return std::nullopt;
}

void keep_on_plans(structure_graphs& s, const hit_call& c, const std::string& why) {
  {
    std::lock_guard lock(s.mutex);
    if (!s.plan_only.empty())
      return;
    s.plan_only = why;
    s.publish();
  }
  log(c.config.logging.level, log_level::info,
      "graph " + std::to_string(c.structure) + " stays on plans: " + why);
}

std::shared_ptr<backward_graph> graph_to_bet_on(const structure_graphs& s,
                                                const published_graphs& table,
                                                const backward_nodes& backward) {
  if (table.plan_only)
    return nullptr;
  if (!table.bets_by_probe) {
    if (!s.steady.load(std::memory_order_relaxed))
      return nullptr;
    auto it = table.shapes.find(s.last_shape.load(std::memory_order_relaxed));
    return it != table.shapes.end() ? it->second.graph : nullptr;
  }
  auto probe = probe_key(backward);
  if (!probe)
    return nullptr;
  auto it = table.probed.find(*probe);
  return it != table.probed.end() ? it->second : nullptr;
}

std::optional<variable_list> replay_hit(const hit_call& c, structure_graphs& s, uint64_t shape,
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
        if (auto it = s.shapes.find(shape); it != s.shapes.end() && it->second.graph == graph) {
          s.shapes.erase(it);
          s.publish();
        }
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
  auto results = graph->replay(live, backward,
                               c10::cuda::CUDAStream(c10::cuda::CUDAStream::UNCHECKED, stream),
                               {c.config.cuda_graphs.hand_out, c.keep_graph,
                                c.config.cuda_graphs.early_launch},
                               std::move(early));
  if (!results) {
    if (const auto* why = graph->rebind_refusal())
      capture_again_copying(c, s, shape, graph, *why);
    return std::nullopt;
  }
  counters.graph_backwards.fetch_add(1, std::memory_order_relaxed);
  if (graph->live_nodes() > 0)
    counters.piecewise_backwards.fetch_add(1, std::memory_order_relaxed);
  s.graph_backwards.fetch_add(1, std::memory_order_relaxed);
  if (!probed && c.config.cuda_graphs.early_launch)
    learn_probe(s, shape, backward);
  if (!c.keep_graph)
    release_saved_variables(c);
  return results;
}

std::optional<lifted_inputs> lift_inputs(const hit_call& c, const structure_graphs& s,
                                         std::string& why) {
  lifted_inputs lifted{std::make_shared<ca::AutogradCompilerCall>(ca::SizeInput::STATIC)};
  stand_in_for_unused_seeds(c.nodes, s.attention_nodes);
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
  for (const auto& t : lifted.call->tensor_args.inputs) {
    if (t.defined() && !t.is_cuda() && !wrapped_scalar(t)) {
      why = "a saved tensor is on the CPU (" + holder_of_cpu_tensor(c) + ")";
      return std::nullopt;
    }
    // Its bit is lost in a graph's buffers: on an H100, replays of
    // `w.mm(w.conj().t())`'s backward gave other gradients than its plan.
    if (t.defined() && (t.is_conj() || t.is_neg())) {
      why = "a saved tensor is a lazy conjugate or negation";
      return std::nullopt;
    }
  }
  lifted.shape = *shape;
  return lifted;
}

} // namespace gradd::cuda
