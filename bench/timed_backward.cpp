// One backward of a benchmark model, timed or measured (see timed_backward.hpp).

#include "bench/timed_backward.hpp"

#include "bench/peak_memory.hpp"
#include "bench/timing.hpp"

#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/autograd/function_hook.h>

#include <memory>
#include <vector>

namespace gradd::bench {

namespace {

/// Records when each parameter's gradient is accumulated.
struct ready_clock final : torch::autograd::PostAccumulateGradHook {
  ready_clock(std::vector<double>& times, std::chrono::steady_clock::time_point& start)
      : times(times), start(start) {}
  void operator()(const torch::autograd::Variable&) override {
    times.push_back(measure::milliseconds_since(start));
  }
  std::vector<double>& times;
  std::chrono::steady_clock::time_point& start;
};

bool penalized = false;

} // namespace

void penalize_gradients(bool on) {
  penalized = on;
}

void step_backward(models::model& model, const torch::Tensor& loss, bool retain_graph) {
  if (!penalized) {
    loss.backward({}, retain_graph);
    return;
  }
  auto parameters = model.parameters();
  auto found = torch::autograd::grad({loss}, parameters, {}, /*retain_graph=*/true,
                                     /*create_graph=*/true, /*allow_unused=*/true);
  auto penalized_loss = loss;
  for (const auto& g : found)
    if (g.defined())
      penalized_loss = penalized_loss + g.square().sum();
  penalized_loss.backward({}, retain_graph);
}

void synchronize(const torch::Device& device) {
  if (!device.is_cuda())
    return;
  c10::impl::VirtualGuardImpl cuda(c10::DeviceType::CUDA);
  cuda.synchronizeStream(cuda.getStream(device));
}

backward_time timed_backward(models::model& model, int64_t step, bool with_gradd,
                             const torch::Device& device) {
  return measured_backward(model, step, with_gradd, device, [] {
    return [start = std::chrono::steady_clock::now()](auto returned) {
      return backward_time{measure::milliseconds_since(start),
                           std::chrono::duration<double, std::milli>(returned - start).count()};
    };
  });
}

int64_t backward_peak(models::model& model, int64_t step, bool with_gradd,
                      const torch::Device& device, bool retain_graph) {
  std::optional<measure::peak_memory> peak;
  return measured_backward(
      model, step, with_gradd, device,
      [&] {
        peak.emplace(device);
        return [&](auto) { return peak->peak_above_start(); };
      },
      retain_graph);
}

measure::device_peaks training_step_peaks(models::model& model, int64_t step, bool with_gradd,
                                          const torch::Device& device, int steps) {
  torch::optim::Adam optimizer(model.parameters(), torch::optim::AdamOptions(0.0));
  std::optional<disable_guard> off;
  if (!with_gradd)
    off.emplace();
  measure::device_peaks peaks;
  for (int k = 0; k < steps; ++k) {
    for (auto p : model.parameters())
      p.mutable_grad() = torch::Tensor();
    synchronize(device);
    measure::reset_cuda_peaks(device);
    auto loss = model.loss(step + k);
    step_backward(model, loss, /*retain_graph=*/false);
    optimizer.step();
    synchronize(device);
    auto now = measure::cuda_peaks(device);
    peaks.allocated = std::max(peaks.allocated, now.allocated);
    peaks.reserved = std::max(peaks.reserved, now.reserved);
  }
  return peaks;
}

std::pair<double, double> gradient_ready_times(models::model& model, int64_t step,
                                               bool with_gradd, const torch::Device& device,
                                               int runs) {
  std::vector<double> times;
  std::chrono::steady_clock::time_point start;
  for (auto p : model.parameters())
    torch::autograd::impl::set_post_acc_grad_hooks(p, std::make_unique<ready_clock>(times, start));
  std::vector<double> firsts, medians;
  for (int r = 0; r < runs; ++r) {
    measured_backward(model, step, with_gradd, device, [&] {
      times.clear();
      start = std::chrono::steady_clock::now();
      return [](auto) { return 0; };
    });
    std::sort(times.begin(), times.end());
    firsts.push_back(times.front());
    medians.push_back(times[times.size() / 2]);
  }
  for (auto p : model.parameters())
    torch::autograd::impl::set_post_acc_grad_hooks(p, nullptr);
  return {measure::median(firsts), measure::median(medians)};
}

} // namespace gradd::bench
