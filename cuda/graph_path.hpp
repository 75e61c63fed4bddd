#pragma once

// The CUDA graph path: what a plan hit on a CUDA device goes through before
// its plan runs. It is the only part of cuda/ that engine/ calls;
// a build without the CUDA toolkit links graph_path_off.cpp instead, where
// every backward stays on its plan.

#include "compiler/ir.hpp"
#include "gradd/settings.hpp"
#include "gradd/statistics.hpp"

#include <c10/core/Stream.h>
#include <torch/csrc/autograd/edge.h>
#include <torch/csrc/autograd/variable.h>

#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace torch::autograd {
struct GraphTask;
struct Node;
}

namespace gradd::execute {
struct output_tap;
}

namespace gradd::cuda {

/// A CUDA graph launched for a backward before libtorch's engine prepared
/// it (Note [Bets before the engine], engine/early_bet.hpp); the
/// backward's graph path confirms it or lets it go (a lost bet).
struct placed_bet;
struct placed_bet_deleter {
  void operator()(placed_bet* bet) const noexcept;
};
using early_bet = std::unique_ptr<placed_bet, placed_bet_deleter>;

/// Launches the graph that structure `structure` (its node table `table`)
/// bets on for a backward of nodes `nodes` (walk order; the first, its
/// root, is not read), as serve_from_graph would after its walk (Note
/// [Early launch]). A bet that launched nothing where it looked for one and
/// found none, which spares serve_from_graph looking again; null where the
/// backward may not bet at all. The walk that found the plan began at
/// `walk_began`: a launched bet counts it as its hit's walk.
early_bet bet_before_engine(uint64_t structure, const compiler::graph& table,
                            const std::vector<torch::autograd::Node*>& nodes,
                            const settings& config,
                            std::chrono::steady_clock::time_point walk_began);

/// Launches the graph that structure `structure` (its node table `table`)
/// bets on, on `stream`, for a backward whose walk has not been made: of
/// its nodes only `head`, the walk's first ones, are known (Note [Bets
/// before the walk], engine/early_bet.hpp). Null where nothing
/// launched: the bet needed a node beyond the head, or there was none.
early_bet bet_before_walk(uint64_t structure, const compiler::graph& table,
                          const std::vector<torch::autograd::Node*>& head,
                          const settings& config, c10::Stream stream);

/// A backward whose structure has a plan, as the graph path sees it.
struct graph_call {
  uint64_t structure;             ///< the plan's record id
  const compiler::graph& table;   ///< the structure's node table
  const std::vector<torch::autograd::Node*>& nodes;  ///< this backward's, in walk order
  const std::shared_ptr<torch::autograd::Node>& root;
  torch::autograd::GraphTask& task;
  bool accumulate_grad;
  const std::vector<torch::autograd::Edge>& outputs;
  const settings& config;
  /// Runs the structure's plan on this backward, handing the tap (if any)
  /// the outputs of the nodes it wants.
  const std::function<void(execute::output_tap*)>& run_plan;
  std::chrono::steady_clock::time_point entered;  ///< when the hook took the backward
  early_bet& bet;  ///< placed for this backward before the engine, or null; taken here
};

/// Serves `call` from the CUDA graph of its shape when there is one. When
/// cuda_graphs.mode asks for a graph of a shape that has none (or whose
/// graph this replay dropped), serves it with its plan (`run_plan`),
/// keeping its saved variables, and has the stream actor record and capture
/// it in the background. Returns the backward's
/// results in either case; nullopt, having changed nothing, where the
/// caller's plan is to serve it: graphs off, not one CUDA stream, a shape
/// being captured or not wanted yet, a structure that stays on plans, over
/// the memory limit, or the graph busy on another thread. A backward served
/// here leaves its stream in the task for post-processing, as a plan does.
std::optional<torch::autograd::variable_list> serve_from_graph(const graph_call& call);

/// A backward whose bet was placed before libtorch's engine, as serve_bet
/// sees it.
struct bet_call {
  uint64_t structure;            ///< the plan's record id
  const compiler::graph& table;  ///< the structure's node table
  /// This backward's, in walk order; the first, its root, holds the
  /// gradients it starts from.
  const std::vector<torch::autograd::Node*>& nodes;
  const settings& config;
};

/// A backward served by serve_bet: its results, and the stream its graph
/// ran on, for the caller to join its own stream with.
struct bet_served {
  torch::autograd::variable_list results;
  c10::Stream stream;
};

/// Serves a backward of `backward()` (no inputs=, no retain_graph) from the
/// graph `bet` launched, if its lift confirms the bet: the structure's graph
/// of its shape is that one (Note [Graph hits before the engine],
/// engine/early_bet.hpp). Takes the bet then. Nullopt otherwise,
/// having changed nothing but the counters; the bet stays for the hook. A
/// replay that finds its graph does not fit, or drops it (a parameter
/// replaced, new arguments refused), takes the bet and gives nullopt too:
/// the hook's graph path serves that backward as any other, and records it
/// for the dropped graph's replacement.
std::optional<bet_served> serve_bet(early_bet& bet, const bet_call& call);

/// The gradient of ones a backward of `loss`, a 0-dim floating CUDA
/// tensor, starts from: made once per thread, device and dtype, and handed
/// to every such backward of that thread (Note [A seed made once],
/// engine/shared_seed.hpp). Undefined where the current stream is
/// capturing, and in a build without CUDA graphs.
at::Tensor shared_seed(const at::Tensor& loss);

/// Adds the graph path's counters to `s`.
void add_graph_statistics(statistics& s);

/// Fills in what CUDA graphs cover of structure `g` (its graphs, their
/// backwards and kernels, or why it stays on plans).
void add_graph_coverage(graph_statistics& g);

/// Zeroes the graph path's counters.
void reset_graph_statistics();

/// Drops every CUDA graph (reset()).
void drop_graphs();

/// Waits until no capture is queued or running, at most `timeout`.
bool wait_graph_captures(std::chrono::milliseconds timeout);

/// At process exit: no new captures; waits at most `grace` for running ones.
bool drain_graph_captures(std::chrono::milliseconds grace);

} // namespace gradd::cuda
