#pragma once

// Comparisons of tensors for the stream actor's checks of a new graph
// (Note [Bound inputs]). On CUDA they are launches of gradd's own kernels
// (compare_kernels.cu), not ATen's: the first use of an ATen kernel in the
// process loads its module (lazy loading, CUDA's default), and while the
// driver loads it, it holds every other thread's launches, the training
// thread's too. On a Hopper GPU the checks of a process's first graph held
// the training thread for 35-45 ms that way (the lstm and wide-mlp shape
// sweeps; docs/design.md, "The stream actor's own kernels").

#include <ATen/core/Tensor.h>

#include <optional>
#include <utility>
#include <vector>

namespace gradd::cuda {

/// Two tensors to compare, or one to look for a non-zero byte in (the
/// second undefined, for bytes_differ only).
using tensor_pair = std::pair<at::Tensor, at::Tensor>;

/// For each pair, whether its tensors differ: in sizes, type, or any byte
/// of their elements (NaN bits included); with the second undefined,
/// whether the first has a non-zero byte. Both of a pair are defined or
/// the second is undefined, and all are on one device. CUDA tensors are
/// compared on the current stream, which this waits for.
std::vector<bool> bytes_differ(const std::vector<tensor_pair>& pairs);

/// For each pair of floating tensors of one size and type, the largest
/// absolute difference between elements that differ (equal infinities are
/// 0 apart); nullopt for a pair of other tensors, or where NaN lies in one
/// and not the other. All on one device, as above.
std::vector<std::optional<double>> rounding_apart(const std::vector<tensor_pair>& pairs);

} // namespace gradd::cuda
