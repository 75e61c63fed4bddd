#pragma once

// Note [Shape probe]
// A bet (Note [Early launch]) is placed before the backward's lift, so it
// cannot read the backward's shape key: it used to bet on the structure's
// last shape once two backwards in a row had it. A loop whose shapes
// change every step (a batch-size sweep, the last batch of an epoch,
// sequences bucketed by length) never bet, and its graphs waited for the
// whole lift: on the H200 the wide-mlp's sweep ran at 1.7–2.1× the floor
// against 1.2–1.3× for one shape. Most of a shape shows in the first node
// the backward runs, the loss's: a mean's or sum's saved sizes hold the
// batch, a loss's saved inputs their shapes. So that node, the probe, is
// lifted alone (a few µs) and its key names the shape to bet on:
// - a structure with several graphs learns each graph's probe key at that
//   graph's first replay, on the training thread (a lift on the capture
//   thread would race an optimizer step), and bets by probe once every
//   graph it holds has one;
// - a probe key two shapes share names neither: a probe that cannot tell a
//   structure's shapes apart places no bet on them;
// - a structure with one graph keeps the rule of two in a row, which lifts
//   nothing.
// A wrong guess (a shape without a graph whose probe looks like one with a
// graph) is a lost bet, checked by the full lift as any other.

#include "cuda/lift_alone.hpp"

#include <cstdint>
#include <optional>

namespace gradd::cuda {

/// The shape key of `backward`'s probe, the first node after its root that
/// runs, lifted alone; nullopt where it has none or it cannot be lifted alone.
std::optional<uint64_t> probe_key(const backward_nodes& backward);

} // namespace gradd::cuda
