// The benchmark models. Dropout is off everywhere: both engines must see the
// same forward pass for their gradients to be comparable bitwise.

#include "examples/models.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <stdexcept>

namespace gradd::models {

namespace {

namespace nn = torch::nn;

/// A batch for `step`: normal values from a generator seeded by the step.
torch::Tensor synthetic(at::IntArrayRef shape, int64_t step, torch::Device device,
                        torch::Dtype dtype) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(step) + 1);
  return torch::randn(shape, gen, torch::dtype(dtype)).to(device);
}

/// A module plus the device and dtype of its data.
template <class Module>
class module_model : public model {
public:
  module_model(Module module, torch::Device device, torch::Dtype dtype)
      : module_(std::move(module)), device_(device), dtype_(dtype) {
    module_->to(device, dtype);
  }
  std::vector<torch::Tensor> parameters() override { return module_->parameters(); }

protected:
  torch::Tensor batch(at::IntArrayRef shape, int64_t step) const {
    return synthetic(shape, step, device_, dtype_);
  }
  Module module_;
  torch::Device device_;
  torch::Dtype dtype_;
};

/// `depth` Linear layers of `width` with tanh between them, MSE loss against
/// sin(x). With several structures, step s runs only the first layers.
class mlp_model final : public module_model<nn::Sequential> {
public:
  mlp_model(int64_t depth, int64_t width, int64_t batch_size, int structures,
            torch::Device device, torch::Dtype dtype)
      : module_model(make(depth, width), device, dtype), depth_(depth), width_(width),
        batch_size_(batch_size), structures_(structures) {}
  torch::Tensor loss(int64_t step) override {
    auto x = batch({batch_size_, width_}, step);
    auto layers = depth_ * (1 + step % structures_) / structures_;
    auto h = x;
    for (int64_t i = 0; i < layers; ++i) {
      h = module_[i]->as<nn::Linear>()->forward(h);
      if (i + 1 < layers)
        h = torch::tanh(h);
    }
    return torch::mse_loss(h, torch::sin(x));  // learnable
  }

private:
  static nn::Sequential make(int64_t depth, int64_t width) {
    nn::Sequential seq;
    for (int64_t i = 0; i < depth; ++i)
      seq->push_back(nn::Linear(width, width));
    return seq;
  }
  int64_t depth_;
  int64_t width_;
  int64_t batch_size_;
  int structures_;
};

struct convnet_impl : nn::Module {
  convnet_impl()
      : conv1(register_module("conv1", nn::Conv2d(nn::Conv2dOptions(3, 16, 3).padding(1)))),
        conv2(register_module("conv2", nn::Conv2d(nn::Conv2dOptions(16, 32, 3).padding(1)))),
        norm(register_module("norm", nn::BatchNorm2d(32))),
        head(register_module("head", nn::Linear(32 * 8 * 8, 10))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(conv1->forward(x)), 2);
    x = torch::max_pool2d(torch::relu(norm->forward(conv2->forward(x))), 2);
    return head->forward(x.flatten(1));
  }
  nn::Conv2d conv1, conv2;
  nn::BatchNorm2d norm;
  nn::Linear head;
};
TORCH_MODULE_IMPL(convnet, convnet_impl);

class convnet_model final : public module_model<convnet> {
public:
  using module_model::module_model;
  torch::Tensor loss(int64_t step) override {
    auto logits = module_->forward(batch({16, 3, 32, 32}, step));
    auto labels = torch::arange(16, torch::dtype(torch::kLong).device(device_)) % 10;
    return torch::cross_entropy_loss(logits, labels);
  }
};

struct lstm_impl : nn::Module {
  lstm_impl()
      : lstm(register_module("lstm", nn::LSTM(nn::LSTMOptions(32, 64).num_layers(2)))),
        head(register_module("head", nn::Linear(64, 32))) {}
  torch::Tensor forward(torch::Tensor x) {
    return head->forward(std::get<0>(lstm->forward(x)));
  }
  nn::LSTM lstm;
  nn::Linear head;
};
TORCH_MODULE_IMPL(lstm_net, lstm_impl);

class lstm_model final : public module_model<lstm_net> {
public:
  using module_model::module_model;
  torch::Tensor loss(int64_t step) override {
    auto x = batch({16, 8, 32}, step);  // (sequence, batch, features)
    return torch::mse_loss(module_->forward(x), batch({16, 8, 32}, step + 1000));
  }
};

struct transformer_impl : nn::Module {
  transformer_impl()
      : encoder(register_module(
            "encoder",
            nn::TransformerEncoder(
                nn::TransformerEncoderOptions(
                    nn::TransformerEncoderLayerOptions(64, 4).dim_feedforward(128).dropout(0.0),
                    2)))),
        head(register_module("head", nn::Linear(64, 64))) {}
  torch::Tensor forward(torch::Tensor x) { return head->forward(encoder->forward(x)); }
  nn::TransformerEncoder encoder;
  nn::Linear head;
};
TORCH_MODULE_IMPL(transformer_net, transformer_impl);

class transformer_model final : public module_model<transformer_net> {
public:
  using module_model::module_model;
  torch::Tensor loss(int64_t step) override {
    auto x = batch({16, 8, 64}, step);  // (sequence, batch, d_model)
    return torch::mse_loss(module_->forward(x), batch({16, 8, 64}, step + 1000));
  }
};

} // namespace

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names{"mlp", "deep-mlp", "convnet", "lstm",
                                              "transformer"};
  return names;
}

std::unique_ptr<model> make_model(const std::string& name, torch::Device device,
                                  torch::Dtype dtype, int structures) {
  torch::manual_seed(0);
  if (name == "mlp")
    return std::make_unique<mlp_model>(4, 256, 64, structures, device, dtype);
  if (name == "deep-mlp")
    return std::make_unique<mlp_model>(64, 32, 16, structures, device, dtype);
  if (structures != 1)
    throw std::invalid_argument("a structure sweep needs an MLP (mlp, deep-mlp), not '" + name
                                + "'");
  if (name == "convnet")
    return std::make_unique<convnet_model>(convnet(), device, dtype);
  if (name == "lstm")
    return std::make_unique<lstm_model>(lstm_net(), device, dtype);
  if (name == "transformer")
    return std::make_unique<transformer_model>(transformer_net(), device, dtype);
  std::string known;
  for (const auto& n : model_names())
    known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown model '" + name + "' (known: " + known + ")");
}

} // namespace gradd::models
