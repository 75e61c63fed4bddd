// gradient_ready_schedule: among independent node calls, runs the ones that
// lead to parameter gradients first, so `.grad` fields fill (and
// post-accumulate-grad hooks fire) early — what lets gradient communication
// overlap the rest of a distributed backward. Off by default.
//
// The ops between the graph inputs and the output form blocks: a node's ops
// (hooks, call, validation) plus the gradient sums that follow its call. A
// block depends on the blocks whose values it uses and on those that used
// them before it (AccumulateGrad steals what nothing else holds);
// a sum's second term depends on its first term's block, so no sum changes
// the order of its terms and gradients stay bitwise equal. Each block gets
// the priority p = the earliest original position of an accumulate_grad
// block it leads to (itself included), and list scheduling takes the ready
// block of lowest (p, original position). Every accumulate_grad block then
// runs no later than before: a block scheduled ahead of it leads to an
// earlier one, and all of that one's ancestors came earlier in the original
// order too.

#include "compiler/passes/registry.hpp"

#include <algorithm>
#include <limits>
#include <queue>

namespace gradd::compiler::passes {

namespace {

struct block {
  size_t first = 0;  ///< op positions [first, last)
  size_t last = 0;
  bool accumulates_grad = false;
  std::vector<uint32_t> successors;
  uint32_t pending = 0;  ///< predecessors not scheduled yet
  size_t priority = std::numeric_limits<size_t>::max();
};

/// Splits ops [begin, end) into node blocks; sums join the block before them.
std::vector<block> blocks_of(const graph& g, size_t begin, size_t end) {
  std::vector<block> blocks;
  for (size_t i = begin; i < end; ++i) {
    const auto& o = g.ops[i];
    bool joins = !blocks.empty()
                 && (o.kind == op_kind::accumulate || g.ops[blocks.back().first].node == o.node);
    if (!joins)
      blocks.push_back({i, i, false, {}, 0});
    blocks.back().last = i + 1;
    blocks.back().accumulates_grad |= o.kind == op_kind::accumulate_grad;
  }
  return blocks;
}

class gradient_ready_schedule_pass final : public pass {
public:
  const char* name() const noexcept override { return "gradient_ready_schedule"; }
  bool run(graph& g, analysis_manager& analyses) override {
    // Graph inputs stay in front, the output and final callbacks at the end.
    size_t begin = 0, end = g.ops.size();
    while (begin < end && g.ops[begin].kind == op_kind::graph_input)
      ++begin;
    while (end > begin && g.ops[end - 1].node == no_node)
      --end;
    auto blocks = blocks_of(g, begin, end);
    std::vector<uint32_t> block_of(g.ops.size(), UINT32_MAX);
    for (uint32_t b = 0; b < blocks.size(); ++b)
      for (size_t i = blocks[b].first; i < blocks[b].last; ++i)
        block_of[i] = b;
    const auto& uses = analyses.uses();
    for (uint32_t b = 0; b < blocks.size(); ++b) {
      std::vector<uint32_t> preds;
      // After the op that touched each arg last, its definition or a use:
      // the uses of a value keep their order, so AccumulateGrad and
      // in-place sums steal what they stole before.
      for (size_t i = blocks[b].first; i < blocks[b].last; ++i)
        for (auto v : g.ops[i].args) {
          auto touch = uses.last_touch_before(v, i);
          if (touch >= 0) {
            auto p = block_of[static_cast<size_t>(touch)];
            if (p != UINT32_MAX && p != b)
              preds.push_back(p);
          }
        }
      std::sort(preds.begin(), preds.end());
      preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
      for (auto p : preds)
        blocks[p].successors.push_back(b);
      blocks[b].pending = static_cast<uint32_t>(preds.size());
    }
    for (size_t b = blocks.size(); b-- > 0;) {
      if (blocks[b].accumulates_grad)
        blocks[b].priority = b;
      for (auto s : blocks[b].successors)
        blocks[b].priority = std::min(blocks[b].priority, blocks[s].priority);
    }
    using entry = std::pair<size_t, uint32_t>;  // (priority, original position)
    std::priority_queue<entry, std::vector<entry>, std::greater<>> ready;
    for (uint32_t b = 0; b < blocks.size(); ++b)
      if (blocks[b].pending == 0)
        ready.push({blocks[b].priority, b});
    std::vector<uint32_t> order;
    while (!ready.empty()) {
      auto b = ready.top().second;
      ready.pop();
      order.push_back(b);
      for (auto s : blocks[b].successors)
        if (--blocks[s].pending == 0)
          ready.push({blocks[s].priority, s});
    }
    if (order.size() != blocks.size())
      throw std::invalid_argument("gradient_ready_schedule: the blocks of the graph form a cycle");
    size_t moved = 0;
    for (uint32_t k = 0; k < order.size(); ++k)
      moved += order[k] != k ? 1 : 0;
    count_moved(moved, "node blocks");
    if (moved == 0)
      return false;
    std::vector<op> ops(std::make_move_iterator(g.ops.begin()),
                        std::make_move_iterator(g.ops.begin() + static_cast<std::ptrdiff_t>(begin)));
    for (auto b : order)
      for (size_t i = blocks[b].first; i < blocks[b].last; ++i)
        ops.push_back(std::move(g.ops[i]));
    for (size_t i = end; i < g.ops.size(); ++i)
      ops.push_back(std::move(g.ops[i]));
    g.ops = std::move(ops);
    analyses.invalidate();
    return true;
  }
};

} // namespace

std::unique_ptr<pass> make_gradient_ready_schedule() {
  return std::make_unique<gradient_ready_schedule_pass>();
}

} // namespace gradd::compiler::passes
