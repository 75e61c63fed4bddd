// Reading, lifting and finishing one backward for functional capture and
// replay (see graph.hpp).
//
// Reading reuses the plan path's pieces (walk_graph, capture_graph,
// mark_needed_nodes) and adds the checks of what functional capture does not
// cover. Lifting follows the compiled autograd driver node by node, so that
// the lifted tensors, sizes and scalars land in the same positions for every
// graph of one structure; the specialization key of each node tells replay
// whether a later graph may reuse a recording.

#include "functional/graph.hpp"

#include "capture/capture_graph.hpp"
#include "compiler/exec_info.hpp"

#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/anomaly_mode.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/generated/Functions.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/csrc/dynamo/compiled_autograd.h>

#include <functional>
#include <stdexcept>
#include <string_view>

namespace gradd::functional {

namespace {

namespace ca = torch::dynamo::autograd;
using torch::autograd::Node;

/// The message of `e` without libtorch's backtrace.
std::string message_of(const std::exception& e) {
  if (auto* error = dynamic_cast<const c10::Error*>(&e))
    return error->what_without_backtrace();
  return e.what();
}

/// Lifts a leaf that runs with hooks, which a CUDA graph replay calls live
/// (Note [Live leaves], cuda/backward_graph.cpp), as collect(NodeCall) and
/// AccumulateGrad::compiled_args lift it, less the hooks. Their
/// compiled_args register them for compiled autograd's own graph, which
/// gradd does not build: a Python hook's touches Python objects on a thread
/// without the GIL, a C++ one's (DistributedDataParallel's) throws.
void lift_live_leaf(ca::CompiledNodeArgs& args, const ca::NodeCall& node_call,
                    const torch::autograd::AccumulateGrad& leaf) {
  args.collect_size(node_call.id);
  args.collect(node_call.graph_output);
  args.collect(true);  // needed
  if (args.cond(leaf.variable.defined() && leaf.variable.requires_grad())) {
    args.collect(leaf.variable);
    args.collect(leaf.variable.grad());
  }
  args.collect(at::GradMode::is_enabled());
}

/// Whether a replay could call node `info` live between two pieces of a
/// CUDA graph: it runs, and is neither the root, a leaf nor taken as a
/// result (whose tensor pre-hooks would change what the backward returns).
bool callable_between_pieces(const compiler::node_info& info) {
  return info.needed && !info.is_root && !info.is_accumulate_grad && info.captures.empty();
}

/// Lifts the place of a node a CUDA graph is cut at (cut_at), not its
/// state: a replay calls it live, and compiled_args of a Python node would
/// run Python without the GIL.
void lift_cut_node(ca::CompiledNodeArgs& args, const ca::NodeCall& node_call) {
  args.collect_size(node_call.id);
  args.collect(true);  // needed
}

/// How lift_node treats the nodes a CUDA graph is cut at.
enum class cut_nodes : bool { lifted, skipped };

/// Lifts node `fn` with table entry `info` into `call`, handing its
/// specialization key to `on_key` (the bytes live only during the call).
template <class OnKey>
void lift_node(ca::AutogradCompilerCall& call, Node& fn, const compiler::node_info& info,
               cut_nodes cuts, OnKey&& on_key) {
  ca::NodeCall& node_call = call.node_calls.lookup(fn.shared_from_this());
  for (const auto& capture : info.captures)
    node_call.mark_output(static_cast<int>(capture.input_nr),
                          static_cast<int>(capture.output_index));
  ca::CompiledNodeArgs args(call, node_call);
  try {
    if (info.is_accumulate_grad && info.needed && info.hooks != compiler::hook_counts{}) {
      lift_live_leaf(args, node_call, static_cast<const torch::autograd::AccumulateGrad&>(fn));
    } else if (cuts == cut_nodes::skipped && cut_at(info, fn)) {
      lift_cut_node(args, node_call);
    } else {
      args.collect(node_call);
      if (args.cond(info.needed)) {
        fn.compiled_args(args);
        args.collect(fn.next_edges());
      }
    }
  } catch (const std::exception& e) {
    throw_capture_error("node " + fn.name() + " cannot be lifted: " + message_of(e));
  }
  auto key = args.key();
  on_key(std::string_view(reinterpret_cast<const char*>(key.key), key.key_size));
}

constexpr uint64_t key_hash_basis = 0xcbf29ce484222325ull;

/// An `on_key` for lift_node that mixes each key into `hash`.
auto hash_into(uint64_t& hash) {
  return [&hash](std::string_view key) {
    hash = (hash ^ std::hash<std::string_view>{}(key)) * 0x100000001b3ull;
  };
}

/// Hooks and unpack hooks arrive as Python objects, which only Python runs.
void check_lifted(const ca::AutogradCompilerCall& call) {
  if (!call.hooks.empty() || !call.sv_to_hooks.empty() || !call.pynode_objs.empty() ||
      !call.packed_inputs.empty() || !call.cpp_tensor_pre_hooks.empty())
    throw_capture_error("the graph holds hooks or Python objects");
}

} // namespace

bool cut_at(const compiler::node_info& info) {
  // By the type's name: libtorch_python, which defines it, may be loaded
  // privately (RTLD_LOCAL), and gradd does not link it.
  return callable_between_pieces(info)
         && (info.hooks != compiler::hook_counts{} || info.type_name == "torch::autograd::PyNode");
}

bool cut_at(const compiler::node_info& info, const Node& node) {
  using EfficientAttention = torch::autograd::generated::ScaledDotProductEfficientAttentionBackward0;
  if (cut_at(info))
    return true;
  const auto* attention = dynamic_cast<const EfficientAttention*>(&node);
  return attention && attention->dropout_p != 0.0 && callable_between_pieces(info);
}

void throw_capture_error(const std::string& why) {
  throw std::runtime_error("gradd functional capture: " + why);
}

graph read_graph(const std::shared_ptr<Node>& root, const torch::autograd::GraphTask& task,
                 bool accumulate_grad, const torch::autograd::edge_list& outputs) {
  if (at::GradMode::is_enabled())
    throw_capture_error("create_graph=True is not captured");
  if (torch::autograd::AnomalyMode::is_enabled())
    throw_capture_error("anomaly mode is on");

  graph g;
  capture::walk_graph(*root, outputs, task.keep_graph_, accumulate_grad, /*plan_variant=*/0,
                     g.walk);
  auto captured = capture::capture_graph(g.walk, task, outputs, accumulate_grad);
  g.ir = std::move(captured.ir);
  compiler::mark_needed_nodes(g.ir);
  // Hooks would run between the functionals, where no recording sees them.
  for (uint32_t i = 0; i < g.ir.nodes.size(); ++i)
    if (compiler::should_execute(g.ir.nodes[i]) && g.ir.nodes[i].hooks != compiler::hook_counts{})
      throw_capture_error("node " + g.node(i).name() + " has hooks");
  if (captured.eager_reason)
    throw_capture_error(std::string("the graph needs the stock engine: ") +
                        to_string(*captured.eager_reason));
  return g;
}

std::vector<std::string> lift_nodes(ca::AutogradCompilerCall& call, const graph& g) {
  std::vector<std::string> keys;
  keys.reserve(g.ir.nodes.size());
  for (uint32_t i = 0; i < g.ir.nodes.size(); ++i) {
    Node& fn = g.node(i);
    std::string key = fn.name();
    if (compiler::should_execute(g.ir.nodes[i])) {
      key.push_back('\0');
      lift_node(call, fn, g.ir.nodes[i], cut_nodes::lifted,
                [&key](std::string_view k) { key += k; });
    }
    keys.push_back(std::move(key));
  }
  check_lifted(call);
  return keys;
}

uint64_t lift_nodes_hashed(ca::AutogradCompilerCall& call,
                           const std::vector<Node*>& nodes, const compiler::graph& table) {
  uint64_t hash = key_hash_basis;
  for (uint32_t i = 0; i < table.nodes.size(); ++i)
    if (compiler::should_execute(table.nodes[i]))
      lift_node(call, *nodes[i], table.nodes[i], cut_nodes::skipped, hash_into(hash));
  check_lifted(call);
  return hash;
}

uint64_t lift_node_hashed(ca::AutogradCompilerCall& call, Node& node,
                          const compiler::node_info& info) {
  uint64_t hash = key_hash_basis;
  lift_node(call, node, info, cut_nodes::skipped, hash_into(hash));
  check_lifted(call);
  return hash;
}

void finish_backward(const graph& g, const std::vector<uint32_t>& leaf_nodes,
                     const torch::autograd::GraphTask& task) {
  if (!task.keep_graph_)
    for (uint32_t i = 0; i < g.ir.nodes.size(); ++i)
      if (g.ir.nodes[i].needed)
        g.node(i).release_variables();
  // The hook receives the task const, but the stock engine records leaf
  // streams in it for exactly this post-processing.
  auto& leaf_streams = const_cast<torch::autograd::GraphTask&>(task).leaf_streams;
  for (uint32_t i : leaf_nodes)
    if (auto stream = g.node(i).stream())
      leaf_streams.emplace(*stream);
}

} // namespace gradd::functional
