#pragma once

// What a graph hit does once its backward is known, shared by its two
// entries: the hook's graph path (graph_path.cpp) and a bet served before
// libtorch's engine (graph_bets.cpp). Internal to cuda/.

#include "compiler/ir.hpp"
#include "cuda/backward_graph.hpp"
#include "gradd/settings.hpp"

#include <c10/core/Stream.h>
#include <torch/csrc/autograd/function.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace torch::dynamo::autograd {
class AutogradCompilerCall;
}

namespace gradd::cuda {

struct published_graphs;
struct structure_graphs;

/// The one CUDA stream every node that runs is on, if there is one: each
/// node's stream() (the stream of its first input on the accelerator), with
/// the accelerator looked up once instead of once a node.
std::optional<c10::Stream> single_stream(const compiler::graph& table,
                                         const std::vector<torch::autograd::Node*>& nodes);

/// Whether `stream` is being captured: a backward inside the user's own
/// CUDA graph runs on its plan, which the user's graph then holds; gradd's
/// graphs neither launch into it nor are captured from it. Asked once per
/// backward, where the graph path or a bet begins.
bool stream_capturing(c10::Stream stream);

/// Whether a replay of `table`'s graphs calls nodes live: any node that
/// runs has hooks, or is a Python autograd.Function. Such a replay runs
/// inside libtorch's engine, in its graph task (Note [Live leaves], Note
/// [Piecewise graphs]): it is not served before the engine.
bool calls_nodes_live(const compiler::graph& table);

/// The nodes of `table` its graphs are cut at (functional::cut_at).
size_t cut_count(const compiler::graph& table);

/// Why no graph can serve a backward of `table` for its hooks, naming the
/// nodes (the first four, and how many more) that run or capture with
/// hooks and that a replay cannot call live: neither a leaf's
/// AccumulateGrad that runs (Note [Live leaves]) nor a node a graph is cut
/// at (Note [Piecewise graphs]), that is, nodes taken as `autograd::grad`
/// results. Nullopt where there is none.
std::optional<std::string> hooks_inside_graph(const compiler::graph& table);

/// The walk-order number of the first node that runs, is a Python
/// autograd.Function (libtorch_python's PyNode) and is no cut (it is taken
/// as an `autograd::grad` result), if there is one. Lifting one runs
/// Python, which the hook may not (it runs without the GIL: a reentrant
/// checkpoint's structure crashed the process there), and no graph could
/// hold it.
std::optional<uint32_t> python_node(const compiler::graph& table,
                                    const std::vector<torch::autograd::Node*>& nodes);

/// What a graph hit needs of its backward, from either entry: the hook's
/// graph_call or a bet served before the engine (bet_call).
struct hit_call {
  uint64_t structure;
  const compiler::graph& table;
  const std::vector<torch::autograd::Node*>& nodes;
  const settings& config;
  std::chrono::steady_clock::time_point entered;
  bool keep_graph;
};

/// Keeps structure `s` on plans for good, said once, for `why`.
void keep_on_plans(structure_graphs& s, const hit_call& c, const std::string& why);

/// The graph a backward of `s` bets on (Note [Early launch]), or null: with
/// one graph, its shape's once two backwards in a row had it; with several,
/// the one its probe names (Note [Shape probe]), in `table`, the structure's
/// published one (Note [Published graphs]).
std::shared_ptr<backward_graph> graph_to_bet_on(const structure_graphs& s,
                                                const published_graphs& table,
                                                const backward_nodes& backward);

/// When a graph hit finished its walk and began its lift; an early launch
/// (Note [Early launch]) lies between the two.
struct hit_times {
  std::chrono::steady_clock::time_point walked;
  std::chrono::steady_clock::time_point lifting;
};

/// Replays `graph` on `stream` for a backward whose inputs, lifted, are
/// `live`, of shape key `shape`: `probed` says whether the graph's probe
/// key is learnt (Note [Shape probe]), `early` is its launch before the
/// lift. Nullopt, the plan's to serve, where the graph does not fit them
/// or the driver refused to point it at them.
std::optional<torch::autograd::variable_list>
replay_hit(const hit_call& c, structure_graphs& s, uint64_t shape,
           const std::shared_ptr<backward_graph>& graph, const std::vector<at::Tensor>& live,
           c10::Stream stream, hit_times times, bool probed,
           std::optional<backward_graph::early_launch> early);

/// A backward's inputs lifted for the graph path, and their shape key.
struct lifted_inputs {
  std::shared_ptr<torch::dynamo::autograd::AutogradCompilerCall> call;
  uint64_t shape = 0;
};

/// Lifts the inputs of `c`'s backward (the order functional capture lifts
/// in), the unused dropout seeds of `s`'s attention nodes given device
/// stand-ins first (Note [Dropout seeds on the device]), and keys their
/// shape; `s` has been vetted (serve_from_graph). Nullopt where no graph can serve it, with
/// `why` saying why its structure should stay on plans; `why` empty where
/// the caller's mistake is to blame (callers_mistake: the plan raises the
/// stock engine's error, and the structure keeps its graphs).
std::optional<lifted_inputs> lift_inputs(const hit_call& c, const structure_graphs& s,
                                         std::string& why);

/// A graph launched for a backward before libtorch's engine prepared it
/// (graph_path.hpp, early_bet).
struct placed_bet {
  uint64_t structure = 0;
  std::shared_ptr<backward_graph> graph;  ///< null where none was launched
  std::optional<backward_graph::early_launch> launch;
  /// Where it launched: a bet before the walk takes the stream of the
  /// backwards before, which this one need not run on.
  std::optional<c10::Stream> stream;
};

} // namespace gradd::cuda
