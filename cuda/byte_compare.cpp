// Byte-for-byte comparison of tensors (see byte_compare.hpp).

#include "cuda/byte_compare.hpp"

#include "cuda/byte_compare_kernel.hpp"

#include <c10/core/impl/VirtualGuardImpl.h>

#include <algorithm>
#include <cstring>

namespace gradd::cuda {

namespace {

std::vector<bool> spans_differ_on_host(const std::vector<compared_span>& spans) {
  std::vector<bool> differ;
  for (const auto& span : spans) {
    auto* bytes = static_cast<const unsigned char*>(span.bytes);
    differ.push_back(span.other ? std::memcmp(bytes, span.other, span.size) != 0
                                : std::any_of(bytes, bytes + span.size,
                                              [](unsigned char b) { return b != 0; }));
  }
  return differ;
}

} // namespace

std::vector<bool> bytes_differ(const std::vector<byte_pair>& pairs) {
  std::vector<bool> differ(pairs.size(), true);
  std::vector<compared_span> spans;
  std::vector<size_t> pair_of_span;
  std::vector<at::Tensor> copies;  // contiguous copies that spans point into
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto& [a, b] = pairs[i];
    if (b.defined() && (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()))
      continue;
    // Dense tensors of one layout are compared where they lie.
    bool in_place = a.is_non_overlapping_and_dense()
                    && (!b.defined()
                        || (b.is_non_overlapping_and_dense() && a.strides() == b.strides()));
    auto bytes_of = [&](const at::Tensor& t) {
      if (in_place)
        return t.const_data_ptr();
      copies.push_back(t.contiguous());
      return copies.back().const_data_ptr();
    };
    const void* bytes = bytes_of(a);
    const void* other = b.defined() ? bytes_of(b) : nullptr;
    spans.push_back({bytes, other, static_cast<size_t>(a.numel()) * a.element_size()});
    pair_of_span.push_back(i);
  }
  if (spans.empty())
    return differ;
  auto device = pairs[pair_of_span.front()].first.device();
  auto found = device.is_cuda()
                   ? spans_differ_on_device(
                         spans, c10::impl::VirtualGuardImpl(device.type()).getStream(device))
                   : spans_differ_on_host(spans);
  for (size_t s = 0; s < spans.size(); ++s)
    differ[pair_of_span[s]] = found[s];
  return differ;
}

} // namespace gradd::cuda
