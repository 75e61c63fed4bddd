// Graph passes over a functional recording (see passes.hpp).

#include "functional/passes.hpp"

#include "compiler/compile.hpp"

namespace gradd::functional {

void refresh_last_uses(recording& rec) {
  const auto& ir = rec.ir;
  rec.last_use.assign(ir.num_values, 0);
  for (uint32_t i = 0; i < ir.ops.size(); ++i) {
    for (auto v : ir.ops[i].results)
      if (v != compiler::no_value)
        rec.last_use[v] = i;
    for (auto v : ir.ops[i].args)
      if (v != compiler::no_value)
        rec.last_use[v] = i;
  }
}

void run_passes(recording& rec, const std::string& pipeline) {
  compiler::run_passes(rec.ir, {pipeline, "functional", "", {}});
  refresh_last_uses(rec);
}

} // namespace gradd::functional
