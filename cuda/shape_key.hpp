#pragma once

// The key of everything a CUDA graph specializes on, from a lift through
// `compiled_args`: what tells a backward's graph from its structure's others.

#include <cstdint>
#include <optional>

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

/// The key of `call`'s lifted state given `nodes`, the hash of the lifted
/// nodes' specialization keys (their non-tensor attributes): the lifted
/// sizes and scalars, and each lifted tensor's dtype, device, sizes and
/// strides. Nullopt for a lifted scalar of a kind it cannot compare.
std::optional<uint64_t> shape_key(const torch::dynamo::autograd::AutogradCompilerCall& call,
                                  uint64_t nodes);

} // namespace gradd::cuda
