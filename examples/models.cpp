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
    auto x = batch({batch_size_at(batch_size_, step), width_}, step);
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
    auto n = batch_size_at(16, step);
    auto logits = module_->forward(batch({n, 3, 32, 32}, step));
    auto labels = torch::arange(n, torch::dtype(torch::kLong).device(device_)) % 10;
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
    auto n = batch_size_at(8, step);
    auto x = batch({16, n, 32}, step);  // (sequence, batch, features)
    return torch::mse_loss(module_->forward(x), batch({16, n, 32}, step + 1000));
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
    auto n = batch_size_at(8, step);
    auto x = batch({16, n, 64}, step);  // (sequence, batch, d_model)
    return torch::mse_loss(module_->forward(x), batch({16, n, 64}, step + 1000));
  }
};

/// 32 × [Linear 256→256, GELU]: many small nodes, where the engine's own
/// cost per node shows most.
class wide_mlp_model final : public module_model<nn::Sequential> {
public:
  wide_mlp_model(torch::Device device, torch::Dtype dtype)
      : module_model(make(), device, dtype) {}
  torch::Tensor loss(int64_t step) override {
    return module_->forward(batch({batch_size_at(64, step), 256}, step)).square().mean();
  }

private:
  static nn::Sequential make() {
    nn::Sequential seq;
    for (int i = 0; i < 32; ++i) {
      seq->push_back(nn::Linear(256, 256));
      seq->push_back(nn::GELU());
    }
    return seq;
  }
};

/// 4 post-norm transformer encoder layers, d_model 256, 4 heads,
/// feed-forward 1024. Dropout 0 is no dropout at all: ATen's dropout returns
/// its input when p is 0, drawing no random numbers and adding no node.
class encoder_model final : public module_model<nn::TransformerEncoder> {
public:
  encoder_model(int64_t sequence, int64_t batch_size, torch::Device device, torch::Dtype dtype)
      : module_model(make(), device, dtype), sequence_(sequence), batch_size_(batch_size) {}
  torch::Tensor loss(int64_t step) override {
    // (sequence, batch, d_model): libtorch's layer has no batch_first.
    auto n = batch_size_at(batch_size_, step);
    return module_->forward(batch({sequence_, n, 256}, step)).square().mean();
  }

private:
  static nn::TransformerEncoder make() {
    auto layer = nn::TransformerEncoderLayerOptions(256, 4).dim_feedforward(1024).dropout(0.0);
    return nn::TransformerEncoder(nn::TransformerEncoderOptions(layer, 4));
  }
  int64_t sequence_;
  int64_t batch_size_;
};

/// torchvision's BasicBlock: two 3×3 convolutions with batch norm, a 1×1
/// convolution with batch norm on the shortcut where the shape changes, and
/// its in-place ReLUs and sum.
struct basic_block_impl : nn::Module {
  basic_block_impl(int64_t in, int64_t out, int64_t stride)
      : conv1(register_module(
            "conv1",
            nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)))),
        bn1(register_module("bn1", nn::BatchNorm2d(out))),
        conv2(register_module(
            "conv2", nn::Conv2d(nn::Conv2dOptions(out, out, 3).padding(1).bias(false)))),
        bn2(register_module("bn2", nn::BatchNorm2d(out))) {
    if (stride != 1 || in != out)
      downsample = register_module(
          "downsample",
          nn::Sequential(nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)),
                         nn::BatchNorm2d(out)));
  }
  torch::Tensor forward(torch::Tensor x) {
    auto out = bn1->forward(conv1->forward(x)).relu_();
    out = bn2->forward(conv2->forward(out));
    out += downsample ? downsample->forward(x) : x;
    return out.relu_();
  }
  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Conv2d conv2;
  nn::BatchNorm2d bn2;
  nn::Sequential downsample{nullptr};
};
TORCH_MODULE_IMPL(basic_block, basic_block_impl);

/// ResNet-18 as torchvision builds it: a 7×7/2 convolution, batch norm, ReLU
/// and max pool, four stages of two BasicBlocks (64, 128, 256, 512
/// channels), adaptive average pool and a 1000-way Linear; convolutions
/// drawn as torchvision draws them (Kaiming normal, fan out).
struct resnet18_impl : nn::Module {
  resnet18_impl()
      : conv1(register_module(
            "conv1", nn::Conv2d(nn::Conv2dOptions(3, 64, 7).stride(2).padding(3).bias(false)))),
        bn1(register_module("bn1", nn::BatchNorm2d(64))),
        layer1(register_module("layer1", stage(64, 64, 1))),
        layer2(register_module("layer2", stage(64, 128, 2))),
        layer3(register_module("layer3", stage(128, 256, 2))),
        layer4(register_module("layer4", stage(256, 512, 2))),
        fc(register_module("fc", nn::Linear(512, 1000))) {
    for (const auto& m : modules(/*include_self=*/false))
      if (auto* conv = m->as<nn::Conv2d>())
        nn::init::kaiming_normal_(conv->weight, 0, torch::kFanOut, torch::kReLU);
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(bn1->forward(conv1->forward(x)).relu_(), 3, 2, 1);
    x = layer4->forward(layer3->forward(layer2->forward(layer1->forward(x))));
    return fc->forward(torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1));
  }
  static nn::Sequential stage(int64_t in, int64_t out, int64_t stride) {
    return nn::Sequential(basic_block(in, out, stride), basic_block(out, out, 1));
  }
  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Sequential layer1, layer2, layer3, layer4;
  nn::Linear fc;
};
TORCH_MODULE_IMPL(resnet18_net, resnet18_impl);

class resnet18_model final : public module_model<resnet18_net> {
public:
  resnet18_model(int64_t batch_size, int64_t image, torch::Device device, torch::Dtype dtype)
      : module_model(resnet18_net(), device, dtype), batch_size_(batch_size), image_(image) {}
  torch::Tensor loss(int64_t step) override {
    auto n = batch_size_at(batch_size_, step);
    return module_->forward(batch({n, 3, image_, image_}, step)).square().mean();
  }

private:
  int64_t batch_size_;
  int64_t image_;
};

} // namespace

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names{
      "mlp", "deep-mlp", "convnet", "lstm", "transformer", "wide-mlp", "encoder", "resnet18"};
  return names;
}

std::unique_ptr<model> make_model(const std::string& name, torch::Device device,
                                  torch::Dtype dtype, model_size size, int structures) {
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
  bool test = size == model_size::test;
  if (name == "wide-mlp")
    return std::make_unique<wide_mlp_model>(device, dtype);
  if (name == "encoder")
    return std::make_unique<encoder_model>(test ? 16 : 128, test ? 2 : 8, device, dtype);
  if (name == "resnet18")
    return std::make_unique<resnet18_model>(test ? 2 : 32, test ? 64 : 224, device, dtype);
  std::string known;
  for (const auto& n : model_names())
    known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown model '" + name + "' (known: " + known + ")");
}

} // namespace gradd::models
