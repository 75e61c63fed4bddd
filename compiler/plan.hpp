#pragma once

// A plan: the static schedule a cache hit runs over the live autograd nodes.

#include "compiler/ir.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace gradd::compiler {

/// Marks a route whose gradient is dropped (no edge, or a node that does not run).
inline constexpr uint32_t no_step = UINT32_MAX;

/// Where output gradient `i` of a step goes: input `input_nr` of step `step`.
struct route {
  uint32_t step = no_step;
  uint32_t input_nr = 0;
  friend bool operator==(const route&, const route&) = default;
};

/// One node call of the schedule.
struct plan_step {
  uint32_t node = 0;          ///< index of the node in the capture's traversal
  bool runs = true;           ///< false: only take its captures
  uint32_t first_route = 0;   ///< its routes are routes[first_route, +route_count)
  uint32_t route_count = 0;
  uint32_t first_capture = 0; ///< its captures are captures[first_capture, +capture_count)
  uint32_t capture_count = 0;
  friend bool operator==(const plan_step&, const plan_step&) = default;
};

/// The compiled form of a node-level graph. The input slots of a step live
/// from its first incoming route to the step itself, which consumes them.
struct plan {
  std::vector<plan_step> steps;
  std::vector<route> routes;
  std::vector<capture_ref> captures;
  /// Nodes (traversal indices) sorted by the sequence numbers seen at capture,
  /// AccumulateGrad and the root left out. The schedule is the stock engine's
  /// only while the live nodes keep this order (Note [Stock engine order]).
  std::vector<uint32_t> sequence_order;
  uint32_t num_nodes = 0;
  uint32_t num_outputs = 0;
  friend bool operator==(const plan&, const plan&) = default;
};

/// Compiles `g`: steps in the order its ops call the nodes, routes from the
/// node table. Throws std::invalid_argument if `g` does not verify.
plan build_plan(const graph& g);

/// Whether the nodes of `g` keep the sequence order `p` was compiled for:
/// a plan compiled from another process's table of the same structure
/// serves this one only then (Note [Stock engine order]).
bool sequence_order_holds(const plan& p, const graph& g) noexcept;

/// A one-line summary, e.g. "plan(steps=12, routes=20, outputs=0)".
std::string to_string(const plan& p);

} // namespace gradd::compiler
