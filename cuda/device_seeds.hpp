#pragma once

// Note [Dropout seeds on the device]
// PyTorch's memory-efficient attention saves its dropout seed and offset as
// CPU tensors, which no graph can read. With dropout off its backward never
// reads them, so before a backward is lifted for the graph path each such
// node gets one device tensor of the same layout standing in for both: the
// node, its plan and its graph give the same bits (`[cuda]` case "memory-
// efficient attention..."), and the stand-in, one per device, never moves.
// With dropout on, its backward dereferences the seed on the host outside a
// capture and reads device memory inside one (measured on a Hopper GPU: a device
// copy crashes the plan), so no stand-in serves both the plan and the graph:
// the graph is cut there, and a replay calls the node live, on its own
// saved state (functional::cut_at, Note [Piecewise graphs]).

#include <cstddef>
#include <cstdint>
#include <vector>

namespace torch::autograd {
struct Node;
}

namespace gradd::cuda {

/// The walk-order numbers of the memory-efficient attention nodes among
/// `nodes`: once per structure, whose key fixes the nodes' types.
std::vector<uint32_t> attention_nodes(const std::vector<torch::autograd::Node*>& nodes);

/// How many of `attention` (attention_nodes of `nodes`' structure) have
/// dropout on: a backward's graph is cut at each (Note [Piecewise graphs]).
size_t with_dropout(const std::vector<torch::autograd::Node*>& nodes,
                    const std::vector<uint32_t>& attention);

/// Gives each of `attention` (attention_nodes of `nodes`' structure) whose
/// dropout is off a device stand-in for the dropout seed and offset it
/// saved on the CPU (Note [Dropout seeds on the device]). Skips saved
/// tensors with pack hooks: only those hooks may read them.
void stand_in_for_unused_seeds(const std::vector<torch::autograd::Node*>& nodes,
                               const std::vector<uint32_t>& attention);

} // namespace gradd::cuda
