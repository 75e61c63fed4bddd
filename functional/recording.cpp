// Packed arguments: recorded as a shape and value ids, rebuilt on replay.
//
// A functional's packed arguments mix constants with tensors of the backward
// that ran. Recording walks each argument depth first and replaces every
// tensor by a placeholder, noting the value that stands for it; rebuilding
// walks the same shape in the same order and puts back the tensor each value
// holds in the later backward. One walk serves both, so the orders agree.

#include "functional/recording.hpp"

namespace gradd::functional {

namespace {

using compiler::no_value;
using compiler::value_id;

/// Returns `iv` with each tensor in it replaced, depth first, by
/// `replace(tensor)`.
template <class Replace>
c10::IValue map_tensors(const c10::IValue& iv, Replace& replace) {
  if (iv.isTensor())
    return replace(iv.toTensor());
  if (iv.isTensorList()) {
    c10::List<at::Tensor> out;
    for (at::Tensor t : iv.toTensorList())
      out.push_back(replace(t));
    return out;
  }
  if (iv.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> out;
    for (std::optional<at::Tensor> t : iv.toOptionalTensorList())
      out.push_back(t ? std::optional<at::Tensor>(replace(*t)) : std::nullopt);
    return out;
  }
  if (iv.isList()) {
    auto list = iv.toList();
    c10::impl::GenericList out(list.elementType());
    for (size_t k = 0; k < list.size(); ++k)
      out.push_back(map_tensors(list.get(k), replace));
    return out;
  }
  if (iv.isTuple()) {
    std::vector<c10::IValue> out;
    for (const c10::IValue& element : iv.toTupleRef().elements())
      out.push_back(map_tensors(element, replace));
    return c10::ivalue::Tuple::create(std::move(out));
  }
  if (iv.isGenericDict()) {
    auto dict = iv.toGenericDict();
    c10::impl::GenericDict out(dict.keyType(), dict.valueType());
    for (const auto& entry : dict)
      out.insert(entry.key(), map_tensors(entry.value(), replace));
    return out;
  }
  return iv;
}

} // namespace

packed_argument packed_argument::record(
    const c10::IValue& arg, const std::function<value_id(const at::Tensor&)>& value_of) {
  packed_argument packed;
  bool holds_tensor = false;
  auto strip = [&](const at::Tensor& t) {
    value_id v = value_of(t);
    packed.tensors.push_back(v);
    holds_tensor = holds_tensor || v != no_value;
    return at::Tensor();
  };
  packed.value = map_tensors(arg, strip);
  if (!holds_tensor) {
    packed.value = arg;
    packed.tensors.clear();
  }
  return packed;
}

c10::IValue packed_argument::rebuild(const std::vector<at::Tensor>& values) const {
  if (tensors.empty())
    return value;
  size_t next = 0;
  auto fill = [&](const at::Tensor&) {
    value_id v = tensors[next++];
    return v == no_value ? at::Tensor() : values[v];
  };
  return map_tensors(value, fill);
}

} // namespace gradd::functional
