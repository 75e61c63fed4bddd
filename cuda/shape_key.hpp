#pragma once

// The key of everything a CUDA graph specializes on, from a lift through
// `compiled_args`: what tells a backward's graph from its structure's others.

#include <cstdint>
#include <optional>

namespace torch::dynamo::autograd {
struct AutogradCompilerCall;
}

namespace gradd::cuda {

/// The key of `call`'s lifted state given `nodes`, the hash of the lifted
/// nodes' specialization keys (their non-tensor attributes): the lifted
/// sizes and scalars, and each lifted tensor's dtype, device, sizes and
/// strides. Nullopt for a lifted scalar of a kind it cannot compare.
std::optional<uint64_t> shape_key(const torch::dynamo::autograd::AutogradCompilerCall& call,
                                  uint64_t nodes);

} // namespace gradd::cuda
