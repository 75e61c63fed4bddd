// What a binding trial's outputs must be (see expected_outputs.hpp).

#include "cuda/expected_outputs.hpp"

#include "cuda/tensor_compare.hpp"

#include <algorithm>
#include <cmath>

namespace gradd::cuda {

namespace {

/// The outputs of `a` and `b` defined in both, paired, with their place.
std::pair<std::vector<tensor_pair>, std::vector<size_t>>
pairs_of(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b,
         const std::vector<bool>& among) {
  std::pair<std::vector<tensor_pair>, std::vector<size_t>> paired;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if (among[i] && a[i].defined() && b[i].defined()) {
      paired.first.emplace_back(a[i], b[i]);
      paired.second.push_back(i);
    }
  return paired;
}

/// Which of the outputs `a` differ from their counterparts in `b` in a
/// byte, or in layout; one comparison for all (tensor_compare.hpp). An
/// output undefined in either does not differ.
std::vector<bool> differing_outputs(const std::vector<at::Tensor>& a,
                                    const std::vector<at::Tensor>& b) {
  auto [pairs, places] = pairs_of(a, b, std::vector<bool>(a.size(), true));
  auto found = bytes_differ(pairs);
  std::vector<bool> differ(a.size(), false);
  for (size_t p = 0; p < places.size(); ++p)
    differ[places[p]] = found[p];
  return differ;
}

/// How far apart each output of `a` that `differ` names is from its
/// counterpart in `b` (rounding_apart, in one measure); nullopt for the
/// others.
std::vector<std::optional<double>> rounding_of(const std::vector<at::Tensor>& a,
                                               const std::vector<at::Tensor>& b,
                                               const std::vector<bool>& differ) {
  auto [pairs, places] = pairs_of(a, b, differ);
  auto found = rounding_apart(pairs);
  std::vector<std::optional<double>> apart(a.size());
  for (size_t p = 0; p < places.size(); ++p)
    apart[places[p]] = found[p];
  return apart;
}

} // namespace

std::optional<expected_outputs>
expected_outputs::of(const std::function<std::vector<at::Tensor>()>& replay) {
  expected_outputs expected{replay(), {}};
  expected.tolerance.assign(expected.outputs.size(), 0);
  auto again = replay();
  if (bitwise_equal(again, expected.outputs))
    return expected;
  for (int r = 0; r <= spread_replays; ++r) {  // the second, then spread_replays more
    if (r > 0)
      again = replay();
    if (again.size() != expected.outputs.size())
      return std::nullopt;
    for (size_t i = 0; i < again.size(); ++i)
      if (again[i].defined() != expected.outputs[i].defined())
        return std::nullopt;
    auto differ = differing_outputs(again, expected.outputs);
    auto apart = rounding_of(again, expected.outputs, differ);
    for (size_t i = 0; i < again.size(); ++i) {
      if (!differ[i])
        continue;
      if (!apart[i])
        return std::nullopt;
      expected.tolerance[i] = std::max(expected.tolerance[i], rounding_margin * *apart[i]);
    }
  }
  return expected;
}

bool expected_outputs::matched_by(const std::vector<at::Tensor>& got) const {
  if (got.size() != outputs.size())
    return false;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i].defined() != outputs[i].defined())
      return false;
  auto differ = differing_outputs(got, outputs);
  for (size_t i = 0; i < got.size(); ++i)
    if (differ[i] && tolerance[i] == 0)
      return false;
  auto apart = rounding_of(got, outputs, differ);
  for (size_t i = 0; i < got.size(); ++i)
    if (differ[i] && apart[i].value_or(INFINITY) > tolerance[i])
      return false;
  return true;
}

bool bitwise_equal(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  return expected_outputs{b, std::vector<double>(b.size(), 0)}.matched_by(a);
}

} // namespace gradd::cuda
