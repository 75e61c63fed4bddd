// The compile recipe (see compile.hpp).

#include "compiler/compile.hpp"

#include "compiler/lower.hpp"
#include "compiler/pass_manager.hpp"

namespace gradd::compiler {

void run_passes(graph& g, const pass_run& run) {
  pass_manager passes(run.pipeline);
  passes.dump_to(run.dump_dir);
  passes.run(g, run.dump_prefix, run.checkpoint);
}

plan compile(graph& g, const pass_run& run) {
  lower_to_node_ops(g);
  run_passes(g, run);
  return build_plan(g);
}

} // namespace gradd::compiler
