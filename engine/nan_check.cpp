// NaN checking after a backward (policy nan_check.enabled). It synchronizes
// with the device once per tensor, which is why it is off by default.

#include "engine/nan_check.hpp"

#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>

#include <sstream>

namespace gradd::engine {

namespace {

bool has_nan(const at::Tensor& t) {
  return t.defined() && t.isnan().any().item<bool>();
}

} // namespace

void check_for_nan(const std::vector<torch::autograd::Node*>& nodes,
                   const torch::autograd::variable_list& outputs) {
  at::NoGradGuard unrecorded;  // whatever the backward's grad mode: the check is not a step of it
  std::ostringstream found;
  size_t leaf = 0;
  for (auto* node : nodes) {
    auto* acc = dynamic_cast<torch::autograd::AccumulateGrad*>(node);
    if (acc == nullptr)
      continue;
    const auto& variable = acc->variable;
    if (has_nan(variable.grad()))
      found << (found.tellp() > 0 ? ", " : "") << "parameter " << leaf << " (shape "
            << variable.sizes() << ")";
    ++leaf;
  }
  for (size_t i = 0; i < outputs.size(); ++i)
    if (has_nan(outputs[i]))
      found << (found.tellp() > 0 ? ", " : "") << "output " << i;
  TORCH_CHECK(found.tellp() == 0, "gradd: NaN in the gradients of: ", found.str(),
              " (leaves are numbered in graph order from the loss)");
}

} // namespace gradd::engine
