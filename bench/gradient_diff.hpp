#pragma once

// How far gradd's gradients are from the stock engine's, and the stock
// engine's from its own second run.

#include "examples/models.hpp"

#include <torch/torch.h>

#include <cstdint>
#include <utility>

namespace gradd::bench {

/// gradd's gradients against the stock engine's on batch `step`, and the
/// stock engine's against its own second run (nondeterministic kernels, such
/// as cuDNN's default convolution backward, make that one non-zero too).
/// Each is the largest difference relative to the stock gradient's largest
/// magnitude, over all parameters; infinite where one side has none.
std::pair<double, double> max_rel_grad_diffs(models::model& model, int64_t step,
                                             const torch::Device& device);

} // namespace gradd::bench
