#pragma once

// A functional recording captured into CUDA graphs, one per piece, each
// capture behind the capture gate into a private pool of the caching
// allocator (program_capture.cpp).

#include "functional/interpret.hpp"

#include <c10/core/Allocator.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <functional>
#include <vector>

namespace gradd::cuda {

/// A recording captured into CUDA graphs, one per piece (Note [Piecewise
/// graphs]), and the outputs the capture left in its pool.
struct captured_program {
  std::vector<cudaGraph_t> graphs;
  functional::program_outputs outputs;
};

/// What a capture does at a cut, between the captures of the pieces before
/// and after it: given the call_node op's position, the node's input
/// gradients and the values in flight, returns where the piece after it
/// reads the node's outputs.
using cut_handler = std::function<torch::autograd::variable_list(
    uint32_t at, const torch::autograd::variable_list& inputs,
    const std::vector<at::Tensor>& in_flight)>;

/// Captures `recording` run on `inputs` into the private pool `pool`, one
/// graph per piece, `at_cut` called between them. The allocator counts
/// each capture as one of the pool's users: the caller gives each graph's
/// share back with releasePool once that graph is gone.
captured_program capture_program(const functional::recording& recording,
                                 const std::vector<torch::autograd::Node*>& nodes,
                                 const std::vector<at::Tensor>& inputs,
                                 const functional::interpret_options& options,
                                 c10::MempoolId_t pool, c10::cuda::CUDAStream side,
                                 const cut_handler& at_cut);

} // namespace gradd::cuda
