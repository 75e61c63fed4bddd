// move_graph_nodes_to_cuda: in a graph with CUDA inputs, a 0-dim CPU input
// used only by built-in ops moves to CUDA, so a CUDA graph of the backward
// needs no host value (the seed's pass of this name). An input that reaches
// a custom function (bound as one: `op::custom_function`) or a whole node
// call stays where it is: user code may expect it on the CPU. Graphs without
// CUDA inputs are left alone. The move is recorded in the input's metadata
// only, which no runtime reads yet: CUDA graphs take a Python number by
// value, keyed on it (Note [Python scalars in graphs], cuda/shape_key.hpp),
// and refuse other CPU saved tensors before the passes run.

#include "compiler/passes/registry.hpp"

namespace gradd::compiler::passes {

namespace {

bool only_builtin_users(const graph& g, const use_def& uses, const op& input) {
  for (auto v : input.results)
    for (auto user : uses.users[v]) {
      const auto& u = g.ops[user];
      if (u.kind != op_kind::apply_functional || u.custom_function)
        return false;
    }
  return true;
}

class move_graph_nodes_to_cuda_pass final : public pass {
public:
  const char* name() const noexcept override { return "move_graph_nodes_to_cuda"; }
  bool run(graph& g, analysis_manager& analyses) override {
    std::string cuda_device;
    for (const auto& o : g.ops)
      if (o.kind == op_kind::graph_input && o.meta.known && o.meta.device.rfind("cuda", 0) == 0) {
        cuda_device = o.meta.device;
        break;
      }
    size_t moved = 0;
    if (!cuda_device.empty()) {
      const auto& uses = analyses.uses();
      for (auto& o : g.ops) {
        bool cpu_scalar = o.kind == op_kind::graph_input && o.meta.known
                          && o.meta.device == "cpu" && o.meta.sizes.empty();
        if (cpu_scalar && only_builtin_users(g, uses, o)) {
          o.meta.device = cuda_device;
          ++moved;
        }
      }
    }
    count_moved(moved, "inputs to " + cuda_device);
    return moved > 0;
  }
};

} // namespace

std::unique_ptr<pass> make_move_graph_nodes_to_cuda() {
  return std::make_unique<move_graph_nodes_to_cuda_pass>();
}

} // namespace gradd::compiler::passes
