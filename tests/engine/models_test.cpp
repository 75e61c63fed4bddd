// Each gradd-bench model: gradients equal the stock engine's bitwise.

#include "engine/grad_check.hpp"
#include "examples/models.hpp"

namespace {

void check_model(const std::string& name, torch::Device device, torch::Dtype dtype) {
  auto m = gradd::models::make_model(name, device, dtype);
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
    DYNAMIC_SECTION(name << " float32") { check_model(name, torch::kCPU, torch::kFloat32); }
    DYNAMIC_SECTION(name << " float64") { check_model(name, torch::kCPU, torch::kFloat64); }
  }
}

TEST_CASE("every benchmark model matches the stock engine bitwise on CUDA",
          "[engine][models][cuda]") {
  if (!torch::cuda::is_available()) {
    WARN("CUDA not available: CUDA model cases skipped");
    return;
  }
  for (const auto& name : gradd::models::model_names())
    DYNAMIC_SECTION(name << " cuda float32") { check_model(name, torch::kCUDA, torch::kFloat32); }
}
