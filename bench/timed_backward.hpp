#pragma once

// One backward of a benchmark model, timed or measured, on the stock engine
// or under gradd: each runs a fresh forward and measures only its backward,
// its stream waited for on both sides.

#include "bench/peak_memory.hpp"
#include "examples/models.hpp"
#include "gradd/gradd.hpp"

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <utility>

namespace gradd::bench {

/// Waits for the current stream, where every backward ends (gradd's
/// post-processing, like the stock engine's, makes it wait for the
/// leaves' streams). Not the whole device: a device-wide synchronize while
/// a stream actor captures a CUDA graph on its own stream would fail
/// (docs/design.md, "CUDA graphs").
void synchronize(const torch::Device& device);

/// Makes every measured step a gradient-penalty step (--create-graph): the
/// loss's gradients with create_graph=true, then the backward of the loss
/// plus their squared norm, both measured. Set before any step runs.
void penalize_gradients(bool on);

/// The step's backward of `loss`, or its two with penalize_gradients.
void step_backward(models::model& model, const torch::Tensor& loss, bool retain_graph);

/// Runs one forward + backward of `model` on batch `step` with gradd on or
/// off (gradd must be enabled), keeping the graph's saved tensors to its
/// end with `retain_graph`. `probe()` is called right before the backward
/// and returns what to call right after it, with when `backward()`
/// returned (before the wait for its stream); that call's result is
/// returned.
template <class Probe>
auto measured_backward(models::model& model, int64_t step, bool with_gradd,
                       const torch::Device& device, Probe probe, bool retain_graph = false) {
  for (auto p : model.parameters())
    p.mutable_grad() = torch::Tensor();
  auto loss = model.loss(step);
  std::optional<disable_guard> off;
  if (!with_gradd)
    off.emplace();
  synchronize(device);
  auto finish = probe();
  step_backward(model, loss, retain_graph);
  auto returned = std::chrono::steady_clock::now();
  synchronize(device);
  return finish(returned);
}

/// A backward's milliseconds: until its stream was done, and until
/// `backward()` returned (the CPU's share; the GPU may still run).
struct backward_time {
  double ms = 0;
  double returned_ms = 0;
};

/// Times one backward (measured_backward).
backward_time timed_backward(models::model& model, int64_t step, bool with_gradd,
                             const torch::Device& device);

/// Bytes allocated at the backward's peak beyond what its start held;
/// with `retain_graph`, its saved tensors are kept to its end, so no
/// gradient reuses the memory of one it has read.
int64_t backward_peak(models::model& model, int64_t step, bool with_gradd,
                      const torch::Device& device, bool retain_graph = false);

/// The CUDA peaks of `steps` whole training steps from batch `step` on:
/// forward, backward (with gradd or the stock engine), an Adam step with
/// lr 0 (so the parameters stay as they are), each from a reset of the
/// peaks; the largest of each. gradd-bench measures 4, a whole sweep of
/// shapes or structures: every one of them once, from any `step`, so two
/// engines measured from different steps see the same batches.
measure::device_peaks training_step_peaks(models::model& model, int64_t step, bool with_gradd,
                                          const torch::Device& device, int steps);

/// Median, over `runs` backwards, of when the first and the median
/// parameter gradient were ready (ms after the backward started).
std::pair<double, double> gradient_ready_times(models::model& model, int64_t step,
                                               bool with_gradd, const torch::Device& device,
                                               int runs);

} // namespace gradd::bench
