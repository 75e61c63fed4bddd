#pragma once

// Most of the seed's reorderings are one of two moves:
// - "as soon as possible": an op right after the op defining its last input,
//   unless that is a graph input (reorder_tensor_pre_hook_nodes,
//   reorder_pre_hook_nodes_to_schedule_asap, reorder_accumulate_grad_nodes);
// - "as late as possible": an op right before the first op using its
//   results (delay_unpack_hook_nodes, and reorder_pre_hook_nodes_to_mimic_eager,
//   which visits hooks last to first so hooks of one node keep their order).
// Neither moves an op past another use of its args: AccumulateGrad and
// in-place sums steal a gradient only while nothing else holds it, and a
// hook may change its gradient in place. (The seed's passes move past them;
// in a recording, one tensor handed to two places is one value used twice.)
// Node-level IR is left alone: lowering placed every hook and accumulation
// where the stock engine calls it, and moving one there would reorder node
// calls (the plan runs nodes in the order the ops first name them), e.g.
// change which of two ready AccumulateGrad nodes runs first. These passes
// are for functional-level IR, where the order comes from elsewhere.

#include "compiler/pass.hpp"

namespace gradd::compiler::passes {

/// Moves each op of its kind right after the definition of its last input.
class move_after_input_pass final : public pass {
public:
  move_after_input_pass(const char* name, op_kind kind) : name_(name), kind_(kind) {}
  const char* name() const noexcept override { return name_; }
  bool run(graph& g, analysis_manager& analyses) override;

private:
  const char* name_;
  op_kind kind_;
};

/// Moves each op of its kind right before the first user of its results,
/// visiting them last to first when `reverse`.
class move_before_user_pass final : public pass {
public:
  move_before_user_pass(const char* name, op_kind kind, bool reverse)
      : name_(name), kind_(kind), reverse_(reverse) {}
  const char* name() const noexcept override { return name_; }
  bool run(graph& g, analysis_manager& analyses) override;

private:
  const char* name_;
  op_kind kind_;
  bool reverse_;
};

} // namespace gradd::compiler::passes
