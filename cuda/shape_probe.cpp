// Note [Shape probe] (shape_probe.hpp).

#include "cuda/shape_probe.hpp"

#include "compiler/exec_info.hpp"

namespace gradd::cuda {

std::optional<uint64_t> probe_key(const backward_nodes& backward) {
  const auto& nodes = backward.table.nodes;
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].is_root || !compiler::should_execute(nodes[i]))
      continue;
    auto lifted = lift_alone(backward, i);
    return lifted ? std::optional(lifted->key) : std::nullopt;
  }
  return std::nullopt;
}

} // namespace gradd::cuda
