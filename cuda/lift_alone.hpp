#pragma once

// One node of a backward lifted through `compiled_args` apart from the
// others: what a launch before the backward's full lift can afford to read
// (Note [Early launch], Note [Shape probe]).

#include "compiler/ir.hpp"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace torch::autograd {
struct Node;
}

namespace gradd::cuda {

/// A backward's nodes in walk order and its structure's node table: what
/// lifts them. `nodes` may hold only the walk's head, the first nodes, and
/// nodes found from it (null where none was).
struct backward_nodes {
  const std::vector<torch::autograd::Node*>& nodes;
  const compiler::graph& table;
};

/// One node lifted alone: the shape key of its lift (cuda/shape_key.hpp),
/// and its tensors in lifting order.
struct lifted_alone {
  uint64_t key = 0;
  std::vector<at::Tensor> tensors;
};

/// Node `node` (walk order) of `backward` lifted alone; nullopt where it
/// cannot be (the full lift then says why) or is not in `backward.nodes`.
std::optional<lifted_alone> lift_alone(const backward_nodes& backward, uint32_t node);

} // namespace gradd::cuda
