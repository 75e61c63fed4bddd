// remove_unused_sizes: drops size inputs (graph_input[size]) that no op
// uses and renumbers the rest densely, in order (the seed's pass of this
// name). `index` of a kept size input becomes its new position; the old one
// moves to `target` as "size:<old>" so the caller can map runtime sizes.

#include "compiler/passes/registry.hpp"

namespace gradd::compiler::passes {

namespace {

class remove_unused_sizes_pass final : public pass {
public:
  const char* name() const noexcept override { return "remove_unused_sizes"; }
  bool run(graph& g, analysis_manager& analyses) override {
    const auto& uses = analyses.uses();
    std::vector<op> kept;
    size_t removed = 0;
    int64_t next = 0;
    bool renumbered = false;
    for (size_t i = 0; i < g.ops.size(); ++i) {
      auto& o = g.ops[i];
      if (o.kind != op_kind::graph_input || o.target.rfind("size", 0) != 0) {
        kept.push_back(std::move(o));
        continue;
      }
      if (!uses.has_users(g, i)) {
        ++removed;
        continue;
      }
      if (o.index != next) {
        o.target = "size:" + std::to_string(o.index);
        o.index = next;
        renumbered = true;
      }
      ++next;
      kept.push_back(std::move(o));
    }
    g.ops = std::move(kept);
    if (removed == 0 && !renumbered) {
      statistic_.clear();
      return false;
    }
    analyses.invalidate();
    statistic_ = "removed " + std::to_string(removed) + " size inputs, kept "
                 + std::to_string(next);
    return true;
  }
};

} // namespace

std::unique_ptr<pass> make_remove_unused_sizes() {
  return std::make_unique<remove_unused_sizes_pass>();
}

} // namespace gradd::compiler::passes
