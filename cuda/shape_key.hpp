#pragma once

// The key of everything a CUDA graph specializes on, from a lift through
// `compiled_args`: what tells a backward's graph from its structure's others.

#include <cstdint>
#include <optional>

namespace at {
class Tensor;
}

namespace torch::dynamo::autograd {
struct AutogradCompilerCall;
}

namespace gradd::cuda {

/// FNV-1a over 64-bit words, the hash of every key here: start from
/// `key_basis`, mix in each word.
constexpr uint64_t key_basis = 0xcbf29ce484222325ull;
constexpr uint64_t mix_key(uint64_t hash, uint64_t word) noexcept {
  return (hash ^ word) * 0x100000001b3ull;
}

// Note [Python scalars in graphs]
// A Python number in a tensor op (`x * 0.5`) reaches libtorch as a 0-dim
// CPU tensor marked as a wrapped number, which MulBackward0 and its kin
// save. A CUDA kernel takes such a scalar by value when it is launched, so
// a captured graph keeps the value it had at the capture. Its value is part
// of the shape key (a backward with another value is another shape), the
// graph reads a CPU copy of it at its capture, and a replay neither copies
// nor binds it. Any other CPU tensor keeps its structure on plans.

/// Whether `t` is a Python number as libtorch wraps it: a defined 0-dim
/// CPU tensor marked as a wrapped number (Note [Python scalars in graphs]).
bool wrapped_scalar(const at::Tensor& t);

/// The key of `call`'s lifted state given `nodes`, the hash of the lifted
/// nodes' specialization keys (their non-tensor attributes): the lifted
/// sizes and scalars, each lifted tensor's dtype, device, sizes and
/// strides, and the value of each wrapped scalar. Nullopt for a lifted
/// scalar of a kind it cannot compare.
std::optional<uint64_t> shape_key(const torch::dynamo::autograd::AutogradCompilerCall& call,
                                  uint64_t nodes);

} // namespace gradd::cuda
