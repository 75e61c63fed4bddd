#pragma once

// Makers of the passes in compiler/passes/, one per file; pass_table()
// (compiler/pass.hpp) lists them with their summaries.

#include "compiler/pass.hpp"

#include <memory>

namespace gradd::compiler::passes {

std::unique_ptr<pass> make_reorder_post_acc_grad_hook_nodes();
std::unique_ptr<pass> make_reorder_post_hook_nodes();
std::unique_ptr<pass> make_dce();
std::unique_ptr<pass> make_remove_unused_sizes();
std::unique_ptr<pass> make_move_graph_nodes_to_cuda();
std::unique_ptr<pass> make_gradient_ready_schedule();

} // namespace gradd::compiler::passes
