#pragma once

// One node of a backward lifted through `compiled_args` apart from the
// others: what a launch before the backward's full lift can afford to read
// (Note [Early launch]).

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

/// Whether `a` and `b` are both defined, of one dtype, sizes and strides.
bool same_layout(const at::Tensor& a, const at::Tensor& b);

/// A tensor of a backward found in one node's lift alone: the node (walk
/// order), its place among that lift's tensors, and the lift's shape key.
struct held_tensor {
  uint32_t node = 0;
  uint32_t ordinal = 0;
  uint64_t key = 0;
};

/// The node whose lift alone holds `tensor` (its address, in its layout):
/// `reader`, the node whose functional reads it, or else the root. A
/// recording has no op for the root (GraphRoot), so the root gradients it
/// lifts are read by the root edge's node, whose lift does not hold them.
/// Nullopt where neither holds it.
std::optional<held_tensor> find_holder(const backward_nodes& backward, uint32_t reader,
                                       const at::Tensor& tensor);

} // namespace gradd::cuda
