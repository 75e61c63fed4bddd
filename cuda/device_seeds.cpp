// Stand-ins for unused dropout seeds (see device_seeds.hpp).

#include "cuda/device_seeds.hpp"

#include <ATen/ops/zeros.h>
#include <torch/csrc/autograd/generated/Functions.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <typeinfo>

namespace gradd::cuda {

namespace {

using torch::autograd::SavedVariable;
using EfficientAttention = torch::autograd::generated::ScaledDotProductEfficientAttentionBackward0;

/// One zero tensor per device and layout: its value is never read.
at::Tensor stand_in(const at::Tensor& like, c10::Device device) {
  static std::mutex mutex;
  static std::map<std::pair<c10::DeviceIndex, std::vector<int64_t>>, at::Tensor> kept;
  std::lock_guard lock(mutex);
  auto& t = kept[{device.index(), like.sizes().vec()}];
  if (!t.defined())
    t = at::zeros(like.sizes(), like.options().device(device));
  return t;
}

/// Replaces `saved`, an int64 CPU tensor, by its stand-in on `device`.
void stand_in_for(SavedVariable& saved, c10::Device device) {
  auto data = saved.get_raw_data();
  if (data && data->defined() && data->is_cpu() && data->scalar_type() == at::kLong)
    saved = SavedVariable(stand_in(*data, device), /*is_output=*/false);
}

} // namespace

std::vector<uint32_t> attention_nodes(const std::vector<torch::autograd::Node*>& nodes) {
  std::vector<uint32_t> found;
  for (uint32_t i = 0; i < nodes.size(); ++i)
    if (nodes[i] != nullptr && typeid(*nodes[i]) == typeid(EfficientAttention))
      found.push_back(i);
  return found;
}

size_t with_dropout(const std::vector<torch::autograd::Node*>& nodes,
                    const std::vector<uint32_t>& attention) {
  return static_cast<size_t>(std::count_if(attention.begin(), attention.end(), [&](uint32_t i) {
    return static_cast<const EfficientAttention&>(*nodes[i]).dropout_p != 0.0;
  }));
}

void stand_in_for_unused_seeds(const std::vector<torch::autograd::Node*>& nodes,
                               const std::vector<uint32_t>& attention_at) {
  for (uint32_t i : attention_at) {
    auto& attention = static_cast<EfficientAttention&>(*nodes[i]);
    if (attention.dropout_p != 0.0)
      continue;  // the backward reads them
    auto query = attention.query_.get_raw_data();
    if (!query || !query->defined() || !query->is_cuda())
      continue;
    if (attention.philox_seed_.has_hooks() || attention.philox_offset_.has_hooks())
      continue;
    stand_in_for(attention.philox_seed_, query->device());
    stand_in_for(attention.philox_offset_, query->device());
  }
}

} // namespace gradd::cuda
