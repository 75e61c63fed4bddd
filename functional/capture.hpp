#pragma once

// Functional capture: one backward run and recorded as the functional
// backwards its nodes call.
//
// Capture lifts every node's saved tensors, sizes and scalars through
// `compiled_args`, then runs each node's `apply_with_saved` under gradd's
// PyCompilerInterface with the node's own tensors as proxies, in the stock
// engine's order. So the backward really runs (capture by execution) while
// each functional call, gradient sum, `.grad` accumulation and CopySlices
// step lands as one op of a recording, which replay (replay.hpp) runs again
// on later backwards of the same structure.

#include "functional/graph.hpp"
#include "functional/recording.hpp"

#include <c10/core/Stream.h>

#include <torch/csrc/autograd/function.h>

#include <memory>

namespace torch::autograd {
struct GraphTask;
}

namespace gradd::functional {

/// Runs one backward, given what Engine::set_compiled_autograd's hook
/// receives, and records it. Gradients match the stock engine's bitwise:
/// nodes run in its ready-queue order and sums add in its arrival order.
///
/// Covers `backward()` and `autograd::grad()` without hooks and without
/// `create_graph`. Throws std::runtime_error naming the reason (a node without
/// `compiled_args` or `apply_with_saved`, hooks, Python objects, anomaly
/// mode, ...). Until it has succeeded, capture leaves no trace the stock
/// engine would see: `.grad` updates and the release of saved variables wait
/// for the end, so a caller that catches the error can run the same backward
/// on the stock engine. Leaf streams go to `task.leaf_streams`; the caller's
/// post-processing syncs them and runs final callbacks. One capture runs at a
/// time in the process (the PyCompilerInterface slot is process-wide).
recording capture(const std::shared_ptr<torch::autograd::Node>& graph_root,
                  const torch::autograd::GraphTask& task, bool accumulate_grad,
                  const torch::autograd::edge_list& outputs);

/// Records, after the fact and on any thread, a backward that already ran
/// elsewhere (a plan): `call` lifted it (lift_nodes_hashed) on its own
/// thread before it ran, and its saved variables were kept since. Runs it
/// again with every op on `stream`, reading AccumulateGrad nodes instead of
/// calling them (their `.grad` belongs to the training thread now), and
/// leaves nothing behind: no `.grad` update, no release, no leaf streams.
/// The lifted tensors stay in `call.tensor_args.inputs`. The nodes a CUDA
/// graph is cut at (cut_at), which lift_nodes_hashed did not lift, are
/// recorded as `call_node` ops returning `cut_outputs` (per node, walk
/// order: what each returned when the backward ran); none where it is
/// empty. Throws as capture() does.
recording record_lifted(torch::dynamo::autograd::AutogradCompilerCall& call, const graph& g,
                        const torch::autograd::GraphTask& task, size_t num_outputs,
                        c10::Stream stream,
                        const std::vector<torch::autograd::variable_list>& cut_outputs);

} // namespace gradd::functional
