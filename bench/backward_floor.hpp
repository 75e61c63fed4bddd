#pragma once

// The speed floor of a CUDA backward: the stock engine's own kernels for one
// backward, captured into one CUDA graph in this process and replayed. No
// engine of any kind runs between them, so no backward engine can beat it
// without other kernels; issue 8's CUDA graphs aim at it (floor_ratio).
// A shape sweep's floor has two readings: each shape's graph replayed in a
// row, and the shapes' graphs replayed in turn, as a sweep runs them
// (switching graphs costs the wide-mlp 50-85 µs a replay on a Hopper GPU).

#include "examples/models.hpp"

#include <optional>
#include <vector>

namespace gradd::measure {

/// Whether this build can measure the floor (it needs the CUDA toolkit's
/// headers at build time).
bool backward_floor_available() noexcept;

/// Medians over the replays of the floor's graph.
struct backward_floor {
  double ms = 0;         ///< a replay, synchronized
  double launch_us = 0;  ///< of that, the CPU time of cudaGraphLaunch
};

/// The floor of `runs` replays of a CUDA graph holding the stock engine's
/// backward of `model`'s loss at `step` (the forward excluded), each replay
/// synchronized as gradd-bench's timed backwards are; nullopt where the
/// build cannot measure it. gradd must be disabled or the caller inside a
/// disable_guard. Leaves the parameters' `.grad` undefined.
std::optional<backward_floor> measure_backward_floor(models::model& model, int64_t step, int runs);

/// The floors of steps `first` to `first + shapes - 1` with their graphs
/// replayed in turn, `runs` rounds: each one's median replay, synchronized,
/// in milliseconds, in step order; empty where the build cannot measure it.
/// As measure_backward_floor otherwise.
std::vector<double> measure_rotating_floor(models::model& model, int64_t first, int shapes,
                                           int runs);

} // namespace gradd::measure
