// Structural capture: from live autograd nodes to gradd's node-level IR.
//
// Runs on a cache miss only, so it may be thorough: it names every node and
// hook type (demangled), records input metadata for the IR's text form, and
// mirrors the stock engine's exec_info (GraphTask::init_to_execute) for
// autograd::grad: output nodes get captures, or are needed outright when
// backward() was given inputs.

#include "capture/capture_graph.hpp"

#include <c10/util/Type.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/functions/basic_ops.h>
#include <torch/csrc/autograd/graph_task.h>

#include <mutex>
#include <typeinfo>
#include <unordered_map>

namespace gradd::capture {

namespace {

using torch::autograd::Node;

/// The demangled name of `type`, cached: demangling costs microseconds and
/// a miss names every node of its graph.
const std::string& type_name_of(const std::type_info& type) {
  static std::mutex mutex;
  // Never destroyed: a thread may capture a graph while the process exits.
  static auto& names = *new std::unordered_map<const std::type_info*, std::string>;
  std::lock_guard lock(mutex);
  auto found = names.find(&type);
  if (found == names.end())
    found = names.emplace(&type, c10::demangle(type.name())).first;
  return found->second;
}

compiler::tensor_meta meta_of(const torch::autograd::InputMetadata& m) {
  compiler::tensor_meta meta;
  if (m.was_default_constructed()) {
    meta.known = false;
    return meta;
  }
  meta.dtype = std::string(m.dtype().name());
  meta.device = m.device().str();
  if (!m.is_nested_tensor()) {
    auto& shape = const_cast<torch::autograd::InputMetadata&>(m).mutable_shape_as_dim_vector();
    for (const auto& s : shape)
      meta.sizes.push_back(s.is_heap_allocated() ? -1 : s.as_int_unchecked());
  }
  return meta;
}

} // namespace

capture_result capture_graph(const graph_walk& walk, const torch::autograd::GraphTask& task,
                             const std::vector<torch::autograd::Edge>& outputs, bool accumulate_grad) {
  capture_result result;
  auto& g = result.ir;
  g.keep_graph = task.keep_graph_;
  g.accumulate_grad = accumulate_grad;
  g.exec_filter = !outputs.empty();
  g.num_outputs = accumulate_grad ? 0 : static_cast<uint32_t>(outputs.size());

  std::unordered_map<const Node*, uint32_t> index;
  index.reserve(walk.nodes.size());
  for (uint32_t i = 0; i < walk.nodes.size(); ++i)
    index.emplace(walk.nodes[i], i);

  g.nodes.resize(walk.nodes.size());
  for (uint32_t i = 0; i < walk.nodes.size(); ++i) {
    Node& n = *walk.nodes[i];
    auto& info = g.nodes[i];
    info.type_name = type_name_of(typeid(n));
    info.sequence_nr = n.sequence_nr();
    info.is_root = i == 0;
    info.is_accumulate_grad = dynamic_cast<torch::autograd::AccumulateGrad*>(&n) != nullptr;
    info.needed = info.is_root || !g.exec_filter;
    info.hooks = {static_cast<uint16_t>(n.tensor_pre_hooks().size()),
                  static_cast<uint16_t>(n.retains_grad_hooks().size()),
                  static_cast<uint16_t>(n.pre_hooks().size()),
                  static_cast<uint16_t>(n.post_hooks().size()),
                  static_cast<uint16_t>(n.tensor_post_acc_grad_hooks() ? 1 : 0)};
    for (uint32_t k = 0; k < n.num_inputs(); ++k) {
      const auto& m = n.input_metadata(k);
      if (!m.was_default_constructed() && m.is_nested_tensor())
        result.eager_reason = fallback_reason::nested_tensor;
      info.inputs.push_back(meta_of(m));
    }
    if (n.topological_nr() < walk.min_topological_nr)
      continue; // not expanded, as in the stock engine
    for (const auto& e : n.next_edges()) {
      if (!e.function) {
        info.edges.push_back({});
        continue;
      }
      info.edges.push_back({index.at(e.function.get()), e.input_nr});
    }
  }

  for (uint32_t k = 0; k < outputs.size(); ++k) {
    auto node = walk.output_nodes[k];
    if (node == UINT32_MAX)
      continue; // unreachable input: its gradient stays undefined
    if (accumulate_grad)
      g.nodes[node].needed = true;
    else
      g.nodes[node].captures.push_back({outputs[k].input_nr, k});
    auto found = task.exec_info_.find(walk.nodes[node]);
    if (found != task.exec_info_.end() && found->second.captures_)
      for (const auto& c : *found->second.captures_)
        if (!c.DO_NOT_USE_DEPRECATED_get_capture_hooks().empty())
          result.eager_reason = fallback_reason::capture_hook;
  }
  return result;
}

} // namespace gradd::capture
