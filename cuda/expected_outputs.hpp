#pragma once

// What a binding trial's outputs must be (Note [Bound inputs],
// input_binding.cpp): a plain replay's, each bit for bit or, where the
// graph's replays differ from one another (kernels that are not
// deterministic), by no more than that rounding. Built with or without
// CUDA (tensor_compare.hpp compares); tests/cuda/expected_outputs_test.cpp
// checks it on CPU tensors.

#include <ATen/core/Tensor.h>

#include <functional>
#include <optional>
#include <vector>

namespace gradd::cuda {

/// How many times the largest difference between plain replays a trial's
/// output may differ by, where the graph's kernels are not deterministic.
constexpr double rounding_margin = 4;

/// Plain replays that measure how far a graph's replays differ, where two
/// did not agree bit for bit.
constexpr int spread_replays = 3;

struct expected_outputs {
  std::vector<at::Tensor> outputs;
  std::vector<double> tolerance;  ///< per output; 0: bit for bit

  /// A plain replay's outputs (`replay` is called twice, and
  /// spread_replays times more where those two differ) and what a trial
  /// may differ from them by: per output that differed, rounding_margin
  /// times the most it did. Nullopt where the replays differ other than by
  /// rounding: NaN in other places, an integer output, an output defined
  /// in one replay only.
  static std::optional<expected_outputs>
  of(const std::function<std::vector<at::Tensor>()>& replay);

  /// Whether `got` matches `outputs`: each output bit for bit (NaN
  /// included, undefined for undefined) or, where it has a tolerance, at
  /// most that far apart, with NaN exactly where `outputs` has it.
  bool matched_by(const std::vector<at::Tensor>& got) const;
};

/// Whether each tensor of `a` holds the bytes of its counterpart in `b`
/// (NaN included; undefined matches undefined).
bool bitwise_equal(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b);

} // namespace gradd::cuda
