// dce: removes pure ops whose results nobody uses, until none is left.
//
// Impure, never removed: graph inputs (their positions are the calling
// convention), node calls (a node may have effects of its own: hooks,
// custom functions, releasing saved variables), accumulate_grad, hook calls,
// unpacks, final callbacks and the output. Pure: validate_outputs,
// accumulate, apply_functional and the copy_slices ops, which only compute
// values. Working backwards once suffices: an op's users come after it.

#include "compiler/passes/registry.hpp"

namespace gradd::compiler::passes {

namespace {

bool is_pure(op_kind kind) {
  switch (kind) {
    case op_kind::validate_outputs:
    case op_kind::accumulate:
    case op_kind::apply_functional:
    case op_kind::copy_slices_prologue:
    case op_kind::copy_slices_epilogue:
      return true;
    default:
      return false;
  }
}

class dce_pass final : public pass {
public:
  const char* name() const noexcept override { return "dce"; }
  bool run(graph& g, analysis_manager& analyses) override {
    std::vector<uint32_t> uses(g.num_values, 0);
    for (const auto& o : g.ops)
      for (auto v : o.args)
        if (v != no_value)
          ++uses[v];
    std::vector<bool> dead(g.ops.size(), false);
    size_t removed = 0;
    for (size_t i = g.ops.size(); i-- > 0;) {
      const auto& o = g.ops[i];
      if (!is_pure(o.kind))
        continue;
      bool used = false;
      for (auto v : o.results)
        used = used || (v != no_value && uses[v] > 0);
      if (used)
        continue;
      dead[i] = true;
      ++removed;
      for (auto v : o.args)
        if (v != no_value)
          --uses[v];
    }
    if (removed == 0) {
      statistic_.clear();
      return false;
    }
    std::vector<op> kept;
    kept.reserve(g.ops.size() - removed);
    for (size_t i = 0; i < g.ops.size(); ++i)
      if (!dead[i])
        kept.push_back(std::move(g.ops[i]));
    g.ops = std::move(kept);
    analyses.invalidate();
    statistic_ = "removed " + std::to_string(removed) + " ops";
    return true;
  }
};

} // namespace

std::unique_ptr<pass> make_dce() {
  return std::make_unique<dce_pass>();
}

} // namespace gradd::compiler::passes
