#pragma once

// Analyses over the IR that passes share: use-def chains, computed on first
// request and dropped when a pass reports a change (as LLVM's analysis
// manager does with analyses a pass did not preserve).

#include "compiler/ir.hpp"

#include <optional>
#include <vector>

namespace gradd::compiler {

/// Where each value is defined and used, by op position.
struct use_def {
  explicit use_def(const graph& g);

  /// Position of the op defining `v`, or -1 (no_value, or undefined).
  std::vector<int64_t> def;
  /// Positions of the ops using `v`, ascending.
  std::vector<std::vector<uint32_t>> users;

  /// Whether any op uses a result of op `position`.
  bool has_users(const graph& g, size_t position) const;

  /// Position of the last op before `position` that defines or uses `v`;
  /// -1 if none.
  int64_t last_touch_before(value_id v, size_t position) const;

  /// Position of the first op after `position` that uses `v`; -1 if none.
  int64_t first_use_after(value_id v, size_t position) const;
};

/// Caches analyses of one graph for the passes of a pipeline.
class analysis_manager {
public:
  explicit analysis_manager(const graph& g) : graph_(g) {}

  /// Use-def chains of the graph as it is now.
  const use_def& uses() {
    if (!uses_)
      uses_.emplace(graph_);
    return *uses_;
  }

  /// Forgets every analysis; call after changing the graph.
  void invalidate() { uses_.reset(); }

private:
  const graph& graph_;
  std::optional<use_def> uses_;
};

/// Ids of the ops of `kind`, in program order.
std::vector<uint32_t> ids_of(const graph& g, op_kind kind);

/// Position of the last op defining one of the op's args (a use), or -1.
int64_t last_def(const use_def& uses, const op& o);

/// Position of the first op using one of the op's results, or -1.
int64_t first_user(const use_def& uses, const op& o);

/// Position of the last op before `position` (where `o` is) that defines
/// or uses one of `o`'s args; -1 if none. An op moved earlier stays after
/// it, so that it finds its args held by as many others as before.
int64_t last_touch_before(const use_def& uses, const op& o, size_t position);

/// Position of the first op after `position` (where `o` is) that uses one
/// of `o`'s args; -1 if none.
int64_t first_use_after(const use_def& uses, const op& o, size_t position);

/// Position of the op with `id`, or -1.
int64_t position_of(const graph& g, uint32_t id);

/// Moves the op at `from` to just after the op at `anchor`.
void move_after(graph& g, size_t from, size_t anchor);

/// Moves the op at `from` to just before the op at `anchor`.
void move_before(graph& g, size_t from, size_t anchor);

} // namespace gradd::compiler
