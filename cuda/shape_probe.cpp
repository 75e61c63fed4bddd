// Note [Shape probe] (shape_probe.hpp).

#include "cuda/shape_probe.hpp"

#include "compiler/exec_info.hpp"
#include "cuda/shape_key.hpp"

#include <torch/csrc/autograd/function.h>

namespace gradd::cuda {

namespace {

/// Mixes `m`, the metadata of a gradient, into `key`; false where its shape
/// is not a list of numbers.
bool mix_metadata(uint64_t& key, const torch::autograd::InputMetadata& m) {
  if (m.was_default_constructed()) {  // an input the node does not use
    key = mix_key(key, ~uint64_t{0});
    return true;
  }
  if (m.is_nested_tensor() || m.is_tensor_subclass())
    return false;
  key = mix_key(key, static_cast<uint64_t>(m.dtype().toScalarType()));
  key = mix_key(key, static_cast<uint64_t>(m.device().type()) << 8
                         | static_cast<uint8_t>(m.device().index()));
  auto shape = m.shape_as_dim_vector();
  key = mix_key(key, shape.size());
  for (const auto& size : shape) {
    auto known = size.maybe_as_int();
    if (!known)
      return false;
    key = mix_key(key, static_cast<uint64_t>(*known));
  }
  return true;
}

} // namespace

std::optional<uint64_t> probe_key(const backward_nodes& backward) {
  const auto& table = backward.table.nodes;
  for (uint32_t i = 0; i < table.size(); ++i) {
    if (table[i].is_root || !compiler::should_execute(table[i]))
      continue;
    if (i >= backward.nodes.size() || !backward.nodes[i])
      return std::nullopt;  // beyond a walk's head (Note [Bets before the walk])
    const torch::autograd::Node& probe = *backward.nodes[i];
    uint64_t key = key_basis;
    for (uint32_t k = 0; k < probe.num_inputs(); ++k)
      if (!mix_metadata(key, probe.input_metadata(k)))
        return std::nullopt;
    for (const auto& edge : probe.next_edges()) {
      if (!edge.function) {
        key = mix_key(key, 0);  // a gradient nobody takes
        continue;
      }
      if (!mix_metadata(key, edge.function->input_metadata(edge.input_nr)))
        return std::nullopt;
    }
    return key;
  }
  return std::nullopt;
}

} // namespace gradd::cuda
