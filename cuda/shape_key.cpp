// The shape key of a lift (see shape_key.hpp).

#include "cuda/shape_key.hpp"

#include <torch/csrc/dynamo/compiled_autograd.h>

#include <algorithm>
#include <bit>
#include <cstring>

namespace gradd::cuda {

bool wrapped_scalar(const at::Tensor& t) {
  return t.defined() && t.is_cpu() && t.dim() == 0
         && t.unsafeGetTensorImpl()->is_wrapped_number();
}

std::optional<uint64_t> shape_key(const torch::dynamo::autograd::AutogradCompilerCall& call,
                                  uint64_t nodes) {
  uint64_t key = nodes;
  for (const auto& size : call.all_size_inputs)
    key = mix_key(key, static_cast<uint64_t>(size.value));
  for (const auto& arg : call.lifted_ivalue_args.args) {
    const auto& v = *arg.actual_ptr;
    if (v.isInt())
      key = mix_key(key, static_cast<uint64_t>(v.toInt()));
    else if (v.isDouble())
      key = mix_key(key, std::bit_cast<uint64_t>(v.toDouble()));
    else if (v.isBool())
      key = mix_key(key, v.toBool());
    else
      return std::nullopt;
  }
  for (const auto& t : call.tensor_args.inputs) {
    if (!t.defined()) {
      key = mix_key(key, 0);
      continue;
    }
    key = mix_key(key, static_cast<uint64_t>(t.scalar_type()) + 1);
    key = mix_key(key, static_cast<uint64_t>(t.device().index()));
    for (int64_t d = 0; d < t.dim(); ++d)
      key = mix_key(mix_key(key, static_cast<uint64_t>(t.size(d))),
                    static_cast<uint64_t>(t.stride(d)));
    if (wrapped_scalar(t)) {  // its value, which a graph keeps
      uint64_t bits = 0;
      std::memcpy(&bits, t.const_data_ptr(), std::min<size_t>(t.element_size(), sizeof bits));
      key = mix_key(key, bits);
    }
  }
  return key;
}

} // namespace gradd::cuda
