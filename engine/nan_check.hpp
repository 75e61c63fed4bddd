#pragma once

#include <torch/csrc/autograd/variable.h>

#include <vector>

namespace torch::autograd {
struct Node;
}

namespace gradd::engine {

/// After a backward: throws c10::Error naming each leaf (by its position
/// among the graph's AccumulateGrad nodes, with its shape) whose `.grad`
/// holds NaN, and each `autograd::grad` output that does, as the seed's
/// NaNChecker. `nodes` are the backward's nodes in walk order.
void check_for_nan(const std::vector<torch::autograd::Node*>& nodes,
                   const torch::autograd::variable_list& outputs);

} // namespace gradd::engine
