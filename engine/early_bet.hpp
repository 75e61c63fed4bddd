#pragma once

// Note [Bets before the engine]
// An early launch made in gradd's hook (Note [Early launch],
// cuda/early_launch.cpp) still waits for what libtorch's Engine::execute
// does before it calls the hook: a GraphTask, a dependency count over the
// whole graph and its bookkeeping. That grows with the graph: 8 µs for the
// mlp and 87 µs for resnet18 at test size on the 2-core VM. The GPU idles
// through it. gradd's engine (entry_gate.cpp) sees a backward before
// Engine::execute does, so the bet is placed there: a walk under a
// GraphRoot of its own (the one Engine::execute makes has the same edges,
// so the walk gives the same key and the same nodes in the same order),
// the plan lookup, and the launch the structure's steady loop bets on,
// under the rules of a launch from the hook. The hook takes it
// (take_early_bet) and its graph path confirms it or lets it go, as it
// would its own. The walk is made for every backward gradd's engine sees,
// bet or not, and the hook adopts it (adopt_walk) instead of walking the
// graph again: nothing is walked twice, and every backward of a C++
// process, on the CPU too, takes that path. On a Hopper GPU the graph's launch
// came 20 µs (mlp) and 104 µs (resnet18) closer to the call of backward().
// Only where gradd's engine is the default one (C++
// processes); in a Python process PyTorch's engine stays, and the hook
// walks and bets itself (walking there from the gradd package's gate was
// slower: docs/design.md, "Early launch and bets"). The hook adopts a walk
// only where its GraphRoot has the edges the walk started from.
//
// Note [Graph hits before the engine]
// Where the bet launched, the backward is mostly a graph hit, and what
// Engine::execute then does before the hook (a GraphTask, the dependency
// count, the gate) and after it is CPU time the replay does not need:
// 12-26 us before the hook and 4-8 us after it on a Hopper GPU's small models,
// which are CPU-bound. So gradd's engine lifts right after the bet and, if
// the lift confirms it (the shape's graph is the one launched), replays
// and hands out here, lets go of the saved variables, and makes the
// caller's stream wait for the graph's: what post-processing does for a
// backward no callback was queued in (nothing runs in a replay that could
// queue one). Only `backward()` as most loops call it: no inputs=, no
// retain_graph, no nan_check, and gradients to start from that
// Engine::execute's check would leave as they are. Anything else, and a
// bet the lift does not confirm, goes on to Engine::execute and the hook
// as before, the bet with it. `graph_hits_before_engine` counts them.
//
// Note [Bets before the walk]
// Where the GPU waits for the launch rather than for the CPU, the walk
// and the plan lookup before the bet are time the GPU idles: 6-8 us on
// a Hopper GPU's small models, 15-27 on wide-mlp, encoder and the
// transformer. A thread whose last two backwards or more were served
// before the engine from one structure is in a steady loop, so its next
// backward, if its root edge's node is of the type that structure's was,
// launches that structure's bet before the walk: on the stream those were
// served on, with only the walk's head known (its root and the root
// edge's node, where the shape probe lies). The nodes holding indices
// read live (resnet18's max-pool) are found from the root edge's node by
// the edges that led there at a replay, and must be of the type they
// were; where they are not, the bet waits for the walk, as before. The
// walk then names the structure: another one makes it a lost bet (a
// launch's GPU time, never a gradient), as does a backward on another
// stream than the bet's, whose graph path launches it again there. A
// thread that alternates structures never has a streak of two, and each
// bet lost to another structure doubles the streak the next one needs (up
// to 64): a loop with a run of three of one structure and then another
// loses one bet, not one a run. `graph_bets_before_walk` counts
// them; their walk is not in `hit_us.walk`, which is what comes before
// the launch.

#include "capture/graph_walk.hpp"
#include "cuda/graph_path.hpp"

#include <torch/csrc/autograd/edge.h>
#include <torch/csrc/autograd/variable.h>

#include <optional>
#include <vector>

namespace gradd::engine {

struct serving_policy;

/// For the backward Engine::execute is about to prepare on this thread:
/// walks its graph and launches its structure's bet, if it has one (Note
/// [Bets before the engine]), and keeps both for the hook until the scope
/// ends.
class early_bet_scope {
public:
  early_bet_scope(const std::vector<torch::autograd::Edge>& roots,
                  const torch::autograd::variable_list& inputs, bool keep_graph,
                  bool create_graph, bool accumulate_grad,
                  const std::vector<torch::autograd::Edge>& outputs);
  /// Lets a bet that no hook took go (a lost bet).
  ~early_bet_scope();

  /// Serves the backward from its bet's graph, here, without libtorch's
  /// engine, if the bet holds (Note [Graph hits before the engine]), and
  /// returns its results; nullopt, for Engine::execute to serve it as any
  /// other, otherwise.
  std::optional<torch::autograd::variable_list>
  serve(const std::vector<torch::autograd::Edge>& roots,
        const torch::autograd::variable_list& inputs, bool keep_graph, bool accumulate_grad,
        const std::vector<torch::autograd::Edge>& outputs);
  early_bet_scope(const early_bet_scope&) = delete;
  early_bet_scope& operator=(const early_bet_scope&) = delete;

private:
  cuda::early_bet outer_;  ///< an enclosing backward's, not taken yet
};

/// The bet placed for the backward whose hook starts now on this thread;
/// null if there is none.
cuda::early_bet take_early_bet() noexcept;

/// Gives `into` the walk early_bet_scope made of that backward, its root
/// replaced by `root` (the GraphRoot Engine::execute made: same edges, so
/// the same walk), and true; false, leaving `into` alone, where no walk was
/// made under `policy` from `root`'s edges.
bool adopt_walk(const serving_policy& policy, torch::autograd::Node& root,
                capture::graph_walk& into) noexcept;

} // namespace gradd::engine
