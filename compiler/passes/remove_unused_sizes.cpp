// remove_unused_sizes: drops size inputs (graph_input[size]) that no op
// uses (the seed's pass of this name). A kept input's `index` stays the
// size's lifted position, which is how the runtime finds its value, so
// nothing is renumbered.

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
    size_t sizes = 0;
    for (size_t i = 0; i < g.ops.size(); ++i) {
      auto& o = g.ops[i];
      bool size_input = o.kind == op_kind::graph_input && o.input == input_kind::size;
      if (size_input && !uses.has_users(g, i)) {
        ++removed;
        continue;
      }
      sizes += size_input ? 1 : 0;
      kept.push_back(std::move(o));
    }
    g.ops = std::move(kept);
    if (removed == 0) {
      statistic_.clear();
      return false;
    }
    analyses.invalidate();
    statistic_ = "removed " + std::to_string(removed) + " size inputs, kept "
                 + std::to_string(sizes);
    return true;
  }
};

} // namespace

std::unique_ptr<pass> make_remove_unused_sizes() {
  return std::make_unique<remove_unused_sizes_pass>();
}

} // namespace gradd::compiler::passes
