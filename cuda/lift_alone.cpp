// One node of a backward lifted alone (see lift_alone.hpp).

#include "cuda/lift_alone.hpp"

#include "cuda/shape_key.hpp"
#include "functional/graph.hpp"

#include <torch/csrc/dynamo/compiled_autograd.h>

#include <algorithm>

namespace gradd::cuda {

std::optional<lifted_alone> lift_alone(const backward_nodes& backward, uint32_t node) {
  if (node >= backward.nodes.size() || !backward.nodes[node])
    return std::nullopt;  // not in a walk's head (Note [Bets before the walk])
  torch::dynamo::autograd::AutogradCompilerCall call(torch::dynamo::autograd::SizeInput::STATIC);
  try {
    auto nodes = functional::lift_node_hashed(call, *backward.nodes[node],
                                                      backward.table.nodes[node]);
    auto key = shape_key(call, nodes);
    if (!key)
      return std::nullopt;
    return lifted_alone{*key, std::move(call.tensor_args.inputs)};
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

bool same_layout(const at::Tensor& a, const at::Tensor& b) {
  return a.defined() && b.defined() && a.scalar_type() == b.scalar_type()
         && a.sizes() == b.sizes() && a.strides() == b.strides();
}

std::optional<held_tensor> find_holder(const backward_nodes& backward, uint32_t reader,
                                       const at::Tensor& tensor) {
  const auto& table = backward.table.nodes;
  auto root = std::find_if(table.begin(), table.end(),
                           [](const compiler::node_info& n) { return n.is_root; });
  std::vector<uint32_t> candidates{reader};
  if (root != table.end() && static_cast<uint32_t>(root - table.begin()) != reader)
    candidates.push_back(static_cast<uint32_t>(root - table.begin()));
  for (uint32_t node : candidates) {
    auto lifted = lift_alone(backward, node);
    if (!lifted)
      continue;
    for (uint32_t k = 0; k < lifted->tensors.size(); ++k)
      if (same_layout(lifted->tensors[k], tensor)
          && lifted->tensors[k].const_data_ptr() == tensor.const_data_ptr())
        return held_tensor{node, k, lifted->key};
  }
  return std::nullopt;
}

} // namespace gradd::cuda
