// Dropout seeds moved to the device (see device_seeds.hpp).

#include "cuda/device_seeds.hpp"

#include <torch/csrc/autograd/generated/Functions.h>

#include <typeinfo>

namespace gradd::cuda {

namespace {

using torch::autograd::SavedVariable;
using EfficientAttention = torch::autograd::generated::ScaledDotProductEfficientAttentionBackward0;

/// Replaces `saved`, a CPU tensor, by a copy on `device`; false where it is
/// not one (or hidden behind pack hooks).
bool move_to(SavedVariable& saved, c10::Device device) {
  auto data = saved.get_raw_data();
  if (!data || !data->defined() || !data->is_cpu())
    return false;
  // A copy from pageable memory of a few bytes is staged by the driver at
  // once; the stream's queued work is not waited for.
  auto on_device = data->to(device, /*non_blocking=*/true);
  saved = SavedVariable(on_device, /*is_output=*/false);
  return true;
}

} // namespace

bool move_dropout_seeds_to_device(const std::vector<torch::autograd::Node*>& nodes) {
  bool moved = false;
  for (auto* node : nodes) {
    if (node == nullptr || typeid(*node) != typeid(EfficientAttention))
      continue;
    auto& attention = static_cast<EfficientAttention&>(*node);
    auto query = attention.query_.get_raw_data();
    if (!query || !query->defined() || !query->is_cuda())
      continue;
    // Both or neither: the backward reads them as one state.
    if (attention.philox_seed_.has_hooks() || attention.philox_offset_.has_hooks())
      continue;
    moved = move_to(attention.philox_seed_, query->device()) | moved;
    moved = move_to(attention.philox_offset_, query->device()) | moved;
  }
  return moved;
}

} // namespace gradd::cuda
