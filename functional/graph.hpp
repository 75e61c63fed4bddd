#pragma once

// One backward's graph as functional capture and replay both start from it.
//
// The graph is read as the plan path reads it: the engine's own walk lists
// the nodes in discovery order (so two graphs of the same structure list
// corresponding nodes at the same indices), structural capture describes
// them as a node table, and compiler::mark_needed_nodes marks which run.
// The order the stock engine would run them in then comes from the one
// simulation of it, compiler::stock_order. Lifting passes over the nodes that
// run or capture, in table order, as the compiled autograd driver does.

#include "capture/graph_walk.hpp"
#include "compiler/ir.hpp"

#include <torch/csrc/autograd/function.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace torch::autograd {
struct GraphTask;
}

namespace torch::dynamo::autograd {
struct AutogradCompilerCall;
}

namespace gradd::functional {

/// Throws the std::runtime_error by which functional capture and replay
/// leave a backward to the stock engine, `why` prefixed with gradd's name.
[[noreturn]] void throw_capture_error(const std::string& why);

/// The nodes of one backward and their table.
struct graph {
  capture::graph_walk walk;  ///< the nodes, root first, in discovery order
  compiler::graph ir;       ///< their table: edges, captures, `needed` marked; no ops

  torch::autograd::Node& node(uint32_t i) const { return *walk.nodes[i]; }
};

/// Reads the graph of a backward, given what Engine::set_compiled_autograd's
/// hook receives. Throws (throw_capture_error) for what functional capture
/// leaves to the stock engine: create_graph, anomaly mode, hooks on a node
/// that runs or captures, and whatever the plan path leaves to it too
/// (nested tensors, capture hooks). Python nodes are refused when lifted.
graph read_graph(const std::shared_ptr<torch::autograd::Node>& root,
                 const torch::autograd::GraphTask& task, bool accumulate_grad,
                 const torch::autograd::edge_list& outputs);

/// Whether a CUDA graph of the backward is cut at node `info`, which a
/// replay calls live between two pieces (Note [Piecewise graphs],
/// cuda/piecewise.cpp), as far as the node table tells: a node that
/// runs with hooks, or a Python autograd.Function, and is neither a leaf
/// nor taken as a result.
bool cut_at(const compiler::node_info& info);

/// cut_at(info), or `node` (whose table entry is `info`) reads state on the
/// host that a graph cannot: memory-efficient attention with dropout on,
/// whose backward reads its seed from a CPU tensor (Note [Dropout seeds on
/// the device], cuda/device_seeds.hpp). A backward of the structure with
/// dropout off is not cut there.
bool cut_at(const compiler::node_info& info, const torch::autograd::Node& node);

/// Lifts the state of every node of `g` that runs or captures into `call`,
/// in table order, as the compiled autograd driver does (the node call, whether
/// it runs, its own state, its edges). Returns, per node, its name and
/// specialization key; throws for a node that cannot be lifted or state only
/// Python could run.
std::vector<std::string> lift_nodes(torch::dynamo::autograd::AutogradCompilerCall& call,
                                    const graph& g);

/// Lifts as lift_nodes does, from a later backward's `nodes` (walk order)
/// and the node table `table` of its structure, without naming the nodes:
/// returns a hash of every lifted node's specialization key instead. Lifts
/// nothing of the nodes a CUDA graph is cut at (cut_at) but their place:
/// a replay calls them live, on their own state.
uint64_t lift_nodes_hashed(torch::dynamo::autograd::AutogradCompilerCall& call,
                           const std::vector<torch::autograd::Node*>& nodes,
                           const compiler::graph& table);

/// Lifts `node` (whose table entry is `info`) alone into `call`, as
/// lift_nodes_hashed lifts it among the others, and returns the hash of its
/// specialization key. Throws as lift_nodes_hashed does.
uint64_t lift_node_hashed(torch::dynamo::autograd::AutogradCompilerCall& call,
                          torch::autograd::Node& node, const compiler::node_info& info);

/// Leaves what the stock engine leaves after a backward: releases the saved
/// variables of the nodes that ran unless the task keeps the graph, and hands
/// the streams of `leaf_nodes` to the caller's post-processing.
void finish_backward(const graph& g, const std::vector<uint32_t>& leaf_nodes,
                     const torch::autograd::GraphTask& task);

} // namespace gradd::functional
