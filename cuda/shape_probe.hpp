#pragma once

// Note [Shape probe]
// A bet (Note [Early launch]) is placed before the backward's lift, so it
// cannot read the backward's shape key: it used to bet on the structure's
// last shape once two backwards in a row had it. A loop whose shapes
// change every step (a batch-size sweep, the last batch of an epoch,
// sequences bucketed by length) never bet, and its graphs waited for the
// whole lift: on a Hopper GPU the wide-mlp's sweep ran at 1.7–2.1× the floor
// against 1.2–1.3× for one shape. Most of a shape shows in the first node
// the backward runs, the loss's, the probe: the gradients it takes and
// those it hands on, whose shapes the autograd graph records at the
// forward (each node's input metadata). A mean's hands on its input's
// shape, batch included; a loss's, its inputs'. So the probe key hashes
// those, reading no saved tensor (lifting the probe alone through
// `compiled_args` cost 5–7 µs before each bet on a Hopper GPU, against
// under 1 µs for the metadata):
// - a structure with several graphs learns each graph's probe key at that
//   graph's first replay, on the training thread, and bets by probe once
//   every graph it holds has one;
// - a probe key two shapes share names neither: a probe that cannot tell a
//   structure's shapes apart (two that differ past the loss's node only)
//   places no bet on them;
// - a structure with one graph keeps the rule of two in a row, which reads
//   nothing.
// A wrong guess (a shape without a graph whose probe looks like one with a
// graph) is a lost bet, checked by the full lift as any other.

#include "cuda/lift_alone.hpp"

#include <cstdint>
#include <optional>

namespace gradd::cuda {

/// The key of `backward`'s probe, the first node after its root that runs:
/// the dtype, device and sizes of each gradient it takes and of each one
/// it hands on. Nullopt where it has none in `backward.nodes` (a walk's
/// head holds it) or a shape is symbolic or nested.
std::optional<uint64_t> probe_key(const backward_nodes& backward);

} // namespace gradd::cuda
