#pragma once

// Inputs a CUDA graph reads where they live instead of from its static
// copies (Note [Bound inputs] in input_binding.cpp). Found once per graph,
// by comparing it with its twin: the same recording captured again with
// every candidate input's static buffer elsewhere. A kernel argument or
// memcpy source that moved between the two by exactly an input's move is
// a pointer derived from that input. A replay then points those at the
// live tensor's memory (cuGraphExecKernelNodeSetParams) where it moved
// since the last replay, which costs CPU time per node rewritten but no
// copy on the device.

#include "cuda/graph_pointers.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gradd::cuda {

/// Where a graph and its twin hold one input's static buffer, and its
/// bytes; both null for an input that is not a candidate.
struct twin_buffers {
  const void* in_graph = nullptr;
  const void* in_twin = nullptr;
  size_t bytes = 0;
};

class bound_inputs {
public:
  bound_inputs();
  ~bound_inputs();
  bound_inputs(bound_inputs&&) noexcept;
  bound_inputs& operator=(bound_inputs&&) noexcept;

  /// Reads every node of `graph` and of `twin` (captured from the same
  /// recording with candidate i's static buffer at `buffers[i].in_twin`
  /// instead of `in_graph`) for pointers derived from the candidates: words
  /// that moved as one input did and point no further from its buffer than
  /// its own length. An
  /// input is bindable where every pointer derived from it found is a
  /// kernel argument or a memcpy source; one a memset or memcpy writes is
  /// not, nor one whose move another input's matches. A graph with a node
  /// of another kind (child graph, host node, ...), a kernel whose
  /// arguments cannot be read, or a twin that differs in any node but its
  /// pointers binds nothing: `why_not()` says why.
  static bound_inputs find(cudaGraph_t graph, cudaGraph_t twin,
                           const std::vector<twin_buffers>& buffers);

  /// Input i is read only through pointers `bind` rewrites.
  bool bindable(size_t input) const;

  /// Keeps only the inputs marked in `keep`, and only the nodes they need.
  void keep_only(const std::vector<bool>& keep);

  /// Whether no input is kept.
  bool empty() const noexcept;

  /// Why nothing is bindable, for the log; "" otherwise.
  const std::string& why_not() const noexcept;

  /// Drops the inputs read by a node whose arguments `exec` refuses to
  /// take back unchanged (a launch the driver cannot update, e.g. one with
  /// launch attributes the read arguments do not carry).
  void keep_settable(cudaGraphExec_t exec);

  /// Points every kept pointer derived from input i at `sources[i]` plus
  /// its offset from the static buffer's first byte (an offset that may lie
  /// outside the buffer: a kernel may take a base moved back by its
  /// padding): the live tensor, laid out as that buffer is. The
  /// next launch of `exec` (instantiated from the graph given to find)
  /// reads there; launches already queued are unaffected. Rewrites only the
  /// nodes whose inputs moved since the last call (`exec` must be the same
  /// each time), and returns how many it rewrote; nullopt where the driver
  /// refused a node's new arguments (`refusal()` says which), after which
  /// the next call rewrites every node.
  std::optional<size_t> bind(cudaGraphExec_t exec, const std::vector<const void*>& sources);

  /// As bind() with the last sources but for the inputs `moved` names
  /// (input, address), touching only the nodes that read those:
  /// bind() reads every kept node, tens of µs on resnet18's graph when its
  /// nodes are cold in the cache (before an early launch). nullopt as for
  /// bind(), and where a node it would rewrite reads an input not bound
  /// yet (before the first bind, after a refusal).
  std::optional<size_t> bind_moved(cudaGraphExec_t exec,
                                   const std::vector<std::pair<uint32_t, const void*>>& moved);

  /// Applies `moves` to the arguments it sets (which `exec` has now) and
  /// sets the nodes they changed in `exec`; false where the driver refused
  /// one. For a graph whose other nodes move_pointers() moved.
  bool move_pointers(cudaGraphExec_t exec, const std::vector<pointer_move>& moves);

  /// The last node the driver refused new arguments for, for the log.
  const std::string& refusal() const noexcept { return refusal_; }

  /// The inputs read by every kept node of the kernel bind last refused
  /// (by that memcpy node, where it was one): the driver refuses a
  /// kernel's nodes alike while its library holds the kernel's shared
  /// memory limit low.
  const std::vector<uint32_t>& refused_inputs() const noexcept { return refused_inputs_; }

private:
  struct node_arguments;
  /// Points `node`'s pointers at `sources`; false where the driver refused.
  bool rewrite(cudaGraphExec_t exec, node_arguments& node, const std::vector<const void*>& sources);

  std::vector<std::unique_ptr<node_arguments>> nodes_;
  std::vector<std::vector<uint32_t>> readers_;  ///< per input: the nodes_ that read it
  std::vector<bool> kept_;  ///< per input: bound
  std::string why_not_;
  std::vector<const void*> bound_to_;  ///< per input: where exec's arguments point now
  std::string refusal_;
  std::vector<uint32_t> refused_inputs_;
};

} // namespace gradd::cuda
