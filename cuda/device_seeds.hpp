#pragma once

// Note [Dropout seeds on the device]
// PyTorch's memory-efficient attention saves its dropout seed and offset as
// CPU tensors, which its backward reads on the host and passes to its kernel
// by value: a graph would replay the values of the step it was captured
// from. Given the same values in device memory, the same backward reads
// them there instead, and its gradients are the same bits (measured on an
// H100 for dropout 0 and 0.1; `[cuda]` cases check it through the engine).
// So before a backward is lifted for the graph path, each such node gets
// device copies of its seed and offset in place of the CPU ones: the graph
// reads them as inputs, fresh at every replay. The plan, should it serve the
// backward after all, runs the node on the device copies, bitwise the same.
// Other nodes that save CPU tensors keep their structure on plans.

#include <vector>

namespace torch::autograd {
struct Node;
}

namespace gradd::cuda {

/// Gives every memory-efficient attention node among `nodes` device copies
/// of the dropout seed and offset it saved on the CPU (Note [Dropout seeds
/// on the device]); returns whether any node got them. Skips nodes whose
/// saved tensors have pack hooks: only those hooks may read them.
bool move_dropout_seeds_to_device(const std::vector<torch::autograd::Node*>& nodes);

} // namespace gradd::cuda
