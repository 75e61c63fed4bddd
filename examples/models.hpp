#pragma once

// Models on synthetic data, shared by the example, gradd-bench and the tests.

#include <torch/torch.h>

#include <algorithm>
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

  /// Makes the batch size change with the step among `sizes` sizes (1, the
  /// default, keeps it fixed): step s uses (1 + s % sizes) / sizes of the
  /// full batch, at least one sample. The structure stays; shapes change.
  void sweep_batch_sizes(int sizes) { batch_sizes_ = sizes; }

protected:
  /// The batch size at `step` of a model whose full batch is `full`.
  int64_t batch_size_at(int64_t full, int64_t step) const {
    return std::max<int64_t>(1, full * (1 + step % batch_sizes_) / batch_sizes_);
  }

private:
  int batch_sizes_ = 1;
};

/// The model names make_model knows.
const std::vector<std::string>& model_names();

/// How large a model's batches are: `bench` as gradd-bench times them,
/// `test` small enough for the CPU suite in float64. Only the batch and the
/// image or sequence shrink, and only where the bench size would be slow
/// (encoder, resnet18); the layers, and so the backward's nodes, stay.
enum class model_size { bench, test };

/// Builds model `name` (one of model_names()) on `device` in `dtype` at
/// `size`, with weights from a fixed seed. With `structures` > 1 (MLPs only)
/// the model changes structure with the step: step s uses the first
/// depth * (1 + s % structures) / structures layers. Throws
/// std::invalid_argument for other names, or a sweep of another model.
std::unique_ptr<model> make_model(const std::string& name, torch::Device device,
                                  torch::Dtype dtype = torch::kFloat32,
                                  model_size size = model_size::bench, int structures = 1);

} // namespace gradd::models
