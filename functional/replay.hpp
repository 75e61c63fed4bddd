#pragma once

// Functional replay: a later backward of a captured structure, run by
// calling the recorded functionals on its own tensors.
//
// Replay reads and lifts the later graph as capture did, so corresponding
// tensors land in corresponding lifted positions; it checks that the graph
// specializes as the recorded one did, then interprets the recorded ops in
// order, with the stock steps (steps.hpp) where an op is no functional
// call.

#include "functional/recording.hpp"

#include <torch/csrc/autograd/function.h>

#include <memory>

namespace torch::autograd {
struct GraphTask;
}

namespace gradd::functional {

/// Runs a later backward of the same structure by calling the functionals of
/// `rec` on this graph's lifted tensors: writes `.grad` for
/// `backward()`, returns the results for `autograd::grad()`, bitwise equal to
/// the stock engine. Throws std::runtime_error, before running anything, when
/// the graph differs from the recorded one (node types, constants, sizes,
/// scalars, which `.grad` exist) or is out of scope as for capture.
torch::autograd::variable_list replay(const recording& rec,
                                      const std::shared_ptr<torch::autograd::Node>& graph_root,
                                      const torch::autograd::GraphTask& task,
                                      bool accumulate_grad,
                                      const torch::autograd::edge_list& outputs);

} // namespace gradd::functional
