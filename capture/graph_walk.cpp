// The per-backward traversal: node list and structural key in one pass.
//
// This runs on every backward, hit or miss, so it is kept lean: a flat
// open-addressing table maps Node* to its index (cleared by bumping a
// generation, not by rewriting it), the key is a vector of words reused
// across backwards, and no node name, hook object or saved variable is
// touched beyond what the key needs. Per node the key holds the node's
// type, its hook counts and one word per edge (target index and input
// number); hook types are added only where hooks exist.

#include "capture/graph_walk.hpp"

#include <torch/csrc/autograd/function.h>

#include <typeinfo>

namespace gradd::capture {

namespace {

using torch::autograd::Node;

constexpr uint32_t unreached = UINT32_MAX;

/// Node* -> index, cleared in O(1) between walks.
class node_index {
public:
  /// Returns the index of `node`, inserting `next` if it is new; sets `added`.
  uint32_t find_or_add(const Node* node, uint32_t next, bool& added) {
    if ((next + 1) * 2 > slots_.size())
      grow();
    size_t mask = slots_.size() - 1;
    for (size_t i = hash(node) & mask;; i = (i + 1) & mask) {
      auto& s = slots_[i];
      if (s.generation != generation_) {
        s = {node, generation_, next};
        added = true;
        return next;
      }
      if (s.node == node) {
        added = false;
        return s.index;
      }
    }
  }

  /// Returns the index of `node`, or `unreached`.
  uint32_t find(const Node* node) const {
    if (slots_.empty())
      return unreached;
    size_t mask = slots_.size() - 1;
    for (size_t i = hash(node) & mask;; i = (i + 1) & mask) {
      const auto& s = slots_[i];
      if (s.generation != generation_)
        return unreached;
      if (s.node == node)
        return s.index;
    }
  }

  void clear() {
    if (++generation_ == 0) { // wrapped: stale slots could look current
      for (auto& s : slots_)
        s.generation = 0;
      generation_ = 1;
    }
  }

private:
  struct slot {
    const Node* node = nullptr;
    uint32_t generation = 0;
    uint32_t index = 0;
  };

  static size_t hash(const Node* node) {
    auto x = reinterpret_cast<uintptr_t>(node) >> 4;
    return static_cast<size_t>(x * 0x9e3779b97f4a7c15ULL >> 20);
  }

  void grow() {
    std::vector<slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 256 : old.size() * 2, slot{});
    size_t mask = slots_.size() - 1;
    for (const auto& s : old) {
      if (s.generation != generation_)
        continue;
      size_t i = hash(s.node) & mask;
      while (slots_[i].generation == generation_)
        i = (i + 1) & mask;
      slots_[i] = s;
    }
  }

  std::vector<slot> slots_;
  uint32_t generation_ = 1;
};

uint64_t type_word(const void* object_type) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(object_type));
}

/// Hook counts of a node in one word; zero for most nodes.
uint64_t hook_word(Node& n) {
  uint64_t tensor_pre = n.tensor_pre_hooks().size();
  uint64_t retains = n.retains_grad_hooks().size();
  uint64_t pre = n.pre_hooks().size();
  uint64_t post = n.post_hooks().size();
  uint64_t acc = n.tensor_post_acc_grad_hooks() != nullptr ? 1 : 0;
  return tensor_pre | retains << 12 | pre << 24 | post << 36 | acc << 48;
}

void add_hook_types(Node& n, std::vector<uint64_t>& words) {
  for (const auto& h : n.tensor_pre_hooks())
    words.push_back(type_word(&typeid(*h)));
  for (const auto& [index, h] : n.retains_grad_hooks())
    words.push_back(type_word(&typeid(*h)));
  for (const auto& h : n.pre_hooks())
    words.push_back(type_word(&typeid(*h)));
  for (const auto& h : n.post_hooks())
    words.push_back(type_word(&typeid(*h)));
  if (auto& h = n.tensor_post_acc_grad_hooks())
    words.push_back(type_word(&typeid(*h)));
}

} // namespace

void walk_graph(Node& root, const std::vector<torch::autograd::Edge>& outputs, bool keep_graph,
                bool accumulate_grad, uint64_t plan_variant, graph_walk& out) {
  thread_local node_index index;
  thread_local std::vector<uint32_t> stack;
  index.clear();
  out.nodes.clear();
  out.output_nodes.clear();
  auto& words = out.key.words;
  words.clear();

  uint64_t min_topo_nr = 0;
  if (!outputs.empty()) {
    min_topo_nr = UINT64_MAX;
    for (const auto& e : outputs)
      min_topo_nr = std::min(min_topo_nr, e.function->topological_nr());
  }
  out.min_topological_nr = min_topo_nr;
  words.push_back(uint64_t{keep_graph} | uint64_t{accumulate_grad} << 1
                  | uint64_t{outputs.size()} << 2);

  bool added = false;
  index.find_or_add(&root, 0, added);
  out.nodes.push_back(&root);
  stack.clear();
  stack.push_back(0);
  // Nodes are numbered when discovered and described when popped; both
  // orders are deterministic, so equal structures give equal words.
  while (!stack.empty()) {
    Node& n = *out.nodes[stack.back()];
    stack.pop_back();
    words.push_back(type_word(&typeid(n)));
    uint64_t hooks = hook_word(n);
    bool expand = n.topological_nr() >= min_topo_nr;
    const auto& edges = n.next_edges();
    words.push_back(hooks << 1 | uint64_t{expand});
    words.push_back(expand ? edges.size() : 0);
    if (hooks != 0)
      add_hook_types(n, words);
    if (!expand)
      continue;
    for (const auto& e : edges) {
      Node* next = e.function.get();
      if (next == nullptr) {
        words.push_back(0);
        continue;
      }
      auto next_index = static_cast<uint32_t>(out.nodes.size());
      auto i = index.find_or_add(next, next_index, added);
      if (added) {
        out.nodes.push_back(next);
        stack.push_back(i);
      }
      words.push_back(uint64_t{i + 1} << 32 | e.input_nr);
    }
  }
  for (const auto& e : outputs) {
    auto i = index.find(e.function.get());
    out.output_nodes.push_back(i);
    words.push_back(uint64_t{i} << 32 | e.input_nr);
  }
  words.push_back(plan_variant);
  out.key.seal();
}

} // namespace gradd::capture
