// The pass table: one row per pass, in the default pipeline's order (the
// seed's end_capture order), then the passes that are off by default.

#include "compiler/passes/registry.hpp"

#include "compiler/passes/hook_moves.hpp"

#include <deque>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>

namespace gradd::compiler {

namespace {

std::unique_ptr<pass> asap(const char* name, op_kind kind) {
  return std::make_unique<passes::move_after_input_pass>(name, kind);
}

std::unique_ptr<pass> alap(const char* name, op_kind kind, bool reverse) {
  return std::make_unique<passes::move_before_user_pass>(name, kind, reverse);
}

/// Passes registered by the program: a deque, so that a reference
/// find_pass returned stays valid while others are added.
struct registered_passes {
  std::shared_mutex mutex;
  std::deque<pass_info> passes;
};

registered_passes& registered() {
  static auto* passes = new registered_passes;  // never destroyed: compiles run at exit
  return *passes;
}

const pass_info* built_in(const std::string& name) {
  for (const auto& p : pass_table())
    if (name == p.name)
      return &p;
  return nullptr;
}

} // namespace

const std::vector<pass_info>& pass_table() {
  // Never destroyed: a compile may still run while the process exits.
  static const auto& table = *new std::vector<pass_info>{
      {"delay_unpack_hook_nodes", "unpack hooks right before their first user",
       [] { return alap("delay_unpack_hook_nodes", op_kind::unpack, false); }},
      {"reorder_tensor_pre_hook_nodes", "tensor pre-hooks right after their gradient",
       [] { return asap("reorder_tensor_pre_hook_nodes", op_kind::tensor_pre_hook); }},
      {"reorder_pre_hook_nodes_to_schedule_asap", "pre-hooks right after their last input",
       [] { return asap("reorder_pre_hook_nodes_to_schedule_asap", op_kind::pre_hook); }},
      {"reorder_accumulate_grad_nodes", "accumulate_grad right after its gradient",
       [] { return asap("reorder_accumulate_grad_nodes", op_kind::accumulate_grad); }},
      {"reorder_pre_hook_nodes_to_mimic_eager", "pre-hooks right before their node, as eager",
       [] { return alap("reorder_pre_hook_nodes_to_mimic_eager", op_kind::pre_hook, true); }},
      {"reorder_post_acc_grad_hook_nodes", "post-accumulate-grad hooks right after accumulate_grad",
       passes::make_reorder_post_acc_grad_hook_nodes},
      {"reorder_post_hook_nodes", "output-less post hooks right after their inputs' last use",
       passes::make_reorder_post_hook_nodes},
      {"dce", "drop pure ops whose results nobody uses", passes::make_dce},
      {"remove_unused_sizes", "drop size inputs nobody uses", passes::make_remove_unused_sizes},
      {"move_graph_nodes_to_cuda", "0-dim CPU inputs of built-in ops to CUDA in CUDA graphs",
       passes::make_move_graph_nodes_to_cuda},
      {"gradient_ready_schedule", "parameter gradients as early as the sums allow (off by default)",
       passes::make_gradient_ready_schedule},
  };
  return table;
}

std::string default_pipeline() {
  std::string names;
  for (const auto& p : pass_table()) {
    if (std::string(p.name) == "gradient_ready_schedule")
      break;
    names += (names.empty() ? "" : ",") + std::string(p.name);
  }
  return names;
}

const pass_info& find_pass(const std::string& name) {
  if (const auto* p = built_in(name))
    return *p;
  auto& r = registered();
  std::shared_lock lock(r.mutex);
  std::string known;
  for (const auto& p : pass_table())
    known += (known.empty() ? "" : ", ") + std::string(p.name);
  for (const auto& p : r.passes) {
    if (name == p.name)
      return p;
    known += ", " + std::string(p.name);
  }
  throw std::invalid_argument("unknown pass '" + name + "' (known: " + known + ")");
}

void register_pass(const pass_info& info) {
  auto& r = registered();
  std::unique_lock lock(r.mutex);
  bool taken = built_in(info.name) != nullptr;
  for (const auto& p : r.passes)
    taken = taken || std::string(info.name) == p.name;
  if (taken)
    throw std::invalid_argument(std::string("a pass named '") + info.name + "' exists");
  r.passes.push_back(info);
}

} // namespace gradd::compiler
