// Comparisons of tensors (see tensor_compare.hpp).

#include "cuda/tensor_compare.hpp"

#include "cuda/compare_kernels.hpp"

#include <ATen/ops/equal.h>
#include <ATen/ops/where.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <algorithm>
#include <cstring>
#include <limits>

namespace gradd::cuda {

namespace {

/// Where the elements of a pair's tensors lie, in order: in place where
/// both are dense in one layout (or the second is undefined), else in
/// contiguous copies, which `copies` keeps.
std::pair<const void*, const void*> elements_of(const tensor_pair& pair,
                                                std::vector<at::Tensor>& copies) {
  const auto& [a, b] = pair;
  bool in_place = a.is_non_overlapping_and_dense()
                  && (!b.defined()
                      || (b.is_non_overlapping_and_dense() && a.strides() == b.strides()));
  auto start = [&](const at::Tensor& t) -> const void* {
    if (!t.defined())
      return nullptr;
    if (in_place)
      return t.const_data_ptr();
    copies.push_back(t.contiguous());
    return copies.back().const_data_ptr();
  };
  return {start(a), start(b)};
}

/// The current stream of the device the pairs are on.
c10::Stream stream_of(const tensor_pair& pair) {
  auto device = pair.first.device();
  return c10::impl::VirtualGuardImpl(device.type()).getStream(device);
}

bool same_kind(const tensor_pair& pair) {
  return pair.first.sizes() == pair.second.sizes()
         && pair.first.scalar_type() == pair.second.scalar_type();
}

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

/// The kernel's type of `type`, where it reads it.
std::optional<float_type> measured_type(at::ScalarType type) {
  switch (type) {
    case at::kHalf:
      return float_type::f16;
    case at::kBFloat16:
      return float_type::bf16;
    case at::kFloat:
      return float_type::f32;
    case at::kDouble:
      return float_type::f64;
    default:
      return std::nullopt;
  }
}

/// rounding_apart of one pair with ATen's kernels: on the CPU, and for
/// floating types gradd's kernel does not read.
std::optional<double> rounding_apart_in_aten(const at::Tensor& a, const at::Tensor& b) {
  if (!at::equal(a.isnan(), b.isnan()))
    return std::nullopt;
  auto apart = at::where(a.eq(b), 0, a.sub(b).abs());  // equal infinities are 0 apart
  return apart.nan_to_num(0, std::numeric_limits<double>::infinity()).max().item<double>();
}

} // namespace

std::vector<bool> bytes_differ(const std::vector<tensor_pair>& pairs) {
  std::vector<bool> differ(pairs.size(), true);
  std::vector<compared_span> spans;
  std::vector<size_t> pair_of_span;
  std::vector<at::Tensor> copies;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto& a = pairs[i].first;
    if (pairs[i].second.defined() && !same_kind(pairs[i]))
      continue;
    auto [bytes, other] = elements_of(pairs[i], copies);
    spans.push_back({bytes, other, static_cast<size_t>(a.numel()) * a.element_size()});
    pair_of_span.push_back(i);
  }
  if (spans.empty())
    return differ;
  const auto& first = pairs[pair_of_span.front()];
  auto found = first.first.is_cuda() ? spans_differ_on_device(spans, stream_of(first))
                                     : spans_differ_on_host(spans);
  for (size_t s = 0; s < spans.size(); ++s)
    differ[pair_of_span[s]] = found[s];
  return differ;
}

std::vector<std::optional<double>> rounding_apart(const std::vector<tensor_pair>& pairs) {
  std::vector<std::optional<double>> apart(pairs.size());
  std::vector<measured_span> spans;
  std::vector<size_t> pair_of_span;
  std::vector<at::Tensor> copies;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto& [a, b] = pairs[i];
    if (!same_kind(pairs[i]) || !at::isFloatingType(a.scalar_type()))
      continue;
    auto type = measured_type(a.scalar_type());
    if (!a.is_cuda() || !type) {
      apart[i] = rounding_apart_in_aten(a, b);
      continue;
    }
    auto [values, others] = elements_of(pairs[i], copies);
    spans.push_back({values, others, static_cast<size_t>(a.numel()), *type});
    pair_of_span.push_back(i);
  }
  if (spans.empty())
    return apart;
  auto measured = spans_apart_on_device(spans, stream_of(pairs[pair_of_span.front()]));
  for (size_t s = 0; s < spans.size(); ++s)
    if (!measured[s].nan_elsewhere)
      apart[pair_of_span[s]] = measured[s].apart;
  return apart;
}

} // namespace gradd::cuda
