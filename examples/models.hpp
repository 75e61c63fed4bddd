#pragma once

// Models on synthetic data, shared by the example, gradd-bench and the tests.

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

namespace gradd::models {

/// A model with its own synthetic data: `loss(step)` runs the forward pass on
/// the batch for `step` (the same step gives the same batch) and returns a
/// scalar loss.
class model {
public:
  virtual ~model() = default;
  virtual torch::Tensor loss(int64_t step) = 0;
  virtual std::vector<torch::Tensor> parameters() = 0;
};

/// The model names make_model knows.
const std::vector<std::string>& model_names();

/// Builds model `name` (one of model_names()) on `device` in `dtype`, with
/// weights from a fixed seed. Throws std::invalid_argument for other names.
std::unique_ptr<model> make_model(const std::string& name, torch::Device device,
                                  torch::Dtype dtype = torch::kFloat32);

} // namespace gradd::models
