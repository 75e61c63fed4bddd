// The process-independent structure key (see portable_key.hpp).
//
// std::hash of a string is a fixed function of its bytes in libstdc++, so
// type names hash the same in every process of one build; the file a plan
// is kept in also names gradd's and torch's versions.

#include "compiler/portable_key.hpp"

#include <algorithm>
#include <functional>
#include <numeric>
#include <tuple>
#include <vector>

namespace gradd::compiler {

namespace {

constexpr uint64_t mix(uint64_t hash, uint64_t word) noexcept {
  return (hash ^ (word + 0x9e3779b97f4a7c15ULL + (hash << 6) + (hash >> 2))) * 0xff51afd7ed558ccdULL;
}

/// What of a node the key holds, compared field by field.
auto structure_of(const node_info& n) {
  return std::tie(n.type_name, n.is_root, n.is_accumulate_grad, n.edges, n.captures, n.hooks);
}

} // namespace

uint64_t plan_variant(const std::string& effective_pipeline) {
  return std::hash<std::string>{}(effective_pipeline);
}

uint64_t portable_key(const graph& g, uint64_t variant) {
  uint64_t key = mix(0, variant);
  key = mix(key, uint64_t{g.keep_graph} | uint64_t{g.accumulate_grad} << 1
                     | uint64_t{g.exec_filter} << 2 | uint64_t{g.num_outputs} << 3);
  for (const auto& n : g.nodes) {
    key = mix(key, std::hash<std::string>{}(n.type_name));
    key = mix(key, uint64_t{n.is_root} | uint64_t{n.is_accumulate_grad} << 1);
    for (const auto& e : n.edges)
      key = mix(mix(key, e.target), e.input_nr);
    for (const auto& c : n.captures)
      key = mix(mix(key, c.input_nr), c.output_index);
    key = mix(key, uint64_t{n.hooks.tensor_pre} | uint64_t{n.hooks.retains_grad} << 16
                       | uint64_t{n.hooks.pre} << 32 | uint64_t{n.hooks.post} << 48);
    key = mix(key, n.hooks.post_acc_grad);
  }
  return key;
}

uint64_t sequence_order_key(const graph& g) {
  std::vector<uint32_t> order(g.nodes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return g.nodes[a].sequence_nr < g.nodes[b].sequence_nr;
  });
  uint64_t key = 0;
  for (auto i : order)
    key = mix(key, i);
  return key;
}

uint64_t shared_plan_key(const graph& g, uint64_t variant) {
  return portable_key(g, variant) ^ sequence_order_key(g);
}

bool same_structure(const graph& a, const graph& b) {
  if (a.nodes.size() != b.nodes.size() || a.keep_graph != b.keep_graph
      || a.accumulate_grad != b.accumulate_grad || a.exec_filter != b.exec_filter
      || a.num_outputs != b.num_outputs)
    return false;
  for (size_t i = 0; i < a.nodes.size(); ++i)
    if (structure_of(a.nodes[i]) != structure_of(b.nodes[i]))
      return false;
  return true;
}

} // namespace gradd::compiler
