#pragma once

// The interpreter of a functional recording: what replay runs on a later
// backward's tensors and what a CUDA graph is captured from.

#include "functional/recording.hpp"

#include <c10/core/Stream.h>
#include <torch/csrc/autograd/function.h>

#include <functional>
#include <optional>
#include <utility>
#include <vector>

namespace gradd::functional {

/// What an `accumulate_grad` op does with its gradient.
enum class leaf_gradients : uint8_t {
  accumulate,  ///< into `.grad` of the leaf, as the stock engine does
  collect,     ///< into program_outputs::leaf_gradients, `.grad` untouched
};

/// How a recording runs.
struct interpret_options {
  leaf_gradients leaves = leaf_gradients::accumulate;
  /// Every op on this stream instead of its node's (a CUDA graph capture).
  std::optional<c10::Stream> stream;
  /// With leaf_gradients::collect: called after each `accumulate_grad` op,
  /// with its place among them (counted from the recording's first) and the
  /// gradient collected, which it may take (a CUDA graph marks there that
  /// the leaf's gradient is ready: Note [Live leaves], cuda/backward_graph.cpp).
  std::function<void(size_t leaf, at::Tensor& gradient)> after_leaf;
  /// Runs a `call_node` op, a node a CUDA graph is cut at (Note [Piecewise
  /// graphs], cuda/piecewise.cpp): given its position, its input
  /// gradients and every value in flight past it (by value id; undefined
  /// where none), returns the node's outputs. A recording with such an op
  /// needs it.
  std::function<torch::autograd::variable_list(uint32_t at, torch::autograd::variable_list inputs,
                                               const std::vector<at::Tensor>& in_flight)>
      call_node;
};

/// What a recording's run produced.
struct program_outputs {
  torch::autograd::variable_list results;  ///< the `output` op's arguments
  /// With leaf_gradients::collect: per `accumulate_grad` op, in order, the
  /// lifted position of its leaf and the gradient it would have accumulated
  /// (undefined where none arrived).
  std::vector<std::pair<uint32_t, at::Tensor>> leaf_gradients;
};

/// Runs the ops of `rec` over the tensors `lifted` (by lifted position) and
/// the graph's `nodes` (in walk order, for streams and output checks),
/// letting go of each value at its last use as the stock engine would.
program_outputs interpret(const recording& rec, const std::vector<torch::autograd::Node*>& nodes,
                          const std::vector<at::Tensor>& lifted,
                          const interpret_options& options = {});

/// Runs the ops of `rec` from position `from` on, as interpret() does, the
/// values in flight before it given by `in_flight` (by value id); the
/// graph inputs are read from `lifted` again. What a CUDA graph cut at a
/// node runs eagerly where the node's outputs do not fit the piece after it
/// (Note [Piecewise graphs], cuda/piecewise.cpp).
program_outputs interpret_rest(const recording& rec,
                               const std::vector<torch::autograd::Node*>& nodes,
                               const std::vector<at::Tensor>& lifted,
                               const interpret_options& options, uint32_t from,
                               std::vector<at::Tensor> in_flight);

} // namespace gradd::functional
