// One node of a backward lifted alone (see lift_alone.hpp).

#include "cuda/lift_alone.hpp"

#include "cuda/shape_key.hpp"
#include "engine/functional/graph.hpp"

#include <torch/csrc/dynamo/compiled_autograd.h>

namespace gradd::cuda {

std::optional<lifted_alone> lift_alone(const backward_nodes& backward, uint32_t node) {
  if (node >= backward.nodes.size() || !backward.nodes[node])
    return std::nullopt;  // not in a walk's head (Note [Bets before the walk])
  torch::dynamo::autograd::AutogradCompilerCall call(torch::dynamo::autograd::SizeInput::STATIC);
  try {
    auto nodes = engine::functional::lift_node_hashed(call, *backward.nodes[node],
                                                      backward.table.nodes[node]);
    auto key = shape_key(call, nodes);
    if (!key)
      return std::nullopt;
    return lifted_alone{*key, std::move(call.tensor_args.inputs)};
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

} // namespace gradd::cuda
