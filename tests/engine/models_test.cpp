// Each gradd-bench model: gradients equal the stock engine's bitwise. The
// CPU cases run the models at their test size (smaller batches, same
// layers); on CUDA they run as gradd-bench times them.

#include "engine/grad_check.hpp"
#include "examples/models.hpp"

#include <ATen/Context.h>

namespace {

using gradd::models::model_size;

/// cuDNN's deterministic algorithms for its scope: its default convolution
/// backward (resnet18's) differs from itself run to run, so neither engine
/// could match the other bitwise.
class deterministic_cudnn_guard {
public:
  deterministic_cudnn_guard() : before_(at::globalContext().deterministicCuDNN()) {
    at::globalContext().setDeterministicCuDNN(true);
  }
  ~deterministic_cudnn_guard() { at::globalContext().setDeterministicCuDNN(before_); }
  deterministic_cudnn_guard(const deterministic_cudnn_guard&) = delete;
  deterministic_cudnn_guard& operator=(const deterministic_cudnn_guard&) = delete;

private:
  bool before_;
};

void check_model(const std::string& name, torch::Device device, torch::Dtype dtype,
                 model_size size) {
  auto m = gradd::models::make_model(name, device, dtype, size);
  auto params = m->parameters();
  int64_t step = 0;
  auto s = gradd::test::check_against_stock(params, [&] {
    m->loss(step).backward();
    return std::vector<torch::Tensor>{};
  });
  CHECK(s.plan_backwards == 2);
  CHECK(s.eager_backwards == 0);
}

} // namespace

TEST_CASE("every benchmark model matches the stock engine bitwise", "[engine][models]") {
  for (const auto& name : gradd::models::model_names()) {
    DYNAMIC_SECTION(name << " float32") {
      check_model(name, torch::kCPU, torch::kFloat32, model_size::test);
    }
    DYNAMIC_SECTION(name << " float64") {
      check_model(name, torch::kCPU, torch::kFloat64, model_size::test);
    }
  }
}

TEST_CASE("every benchmark model matches the stock engine bitwise on CUDA",
          "[engine][models][cuda]") {
  if (!torch::cuda::is_available()) {
    WARN("CUDA not available: CUDA model cases skipped");
    return;
  }
  deterministic_cudnn_guard deterministic;
  for (const auto& name : gradd::models::model_names())
    DYNAMIC_SECTION(name << " cuda float32") {
      check_model(name, torch::kCUDA, torch::kFloat32, model_size::bench);
    }
}
