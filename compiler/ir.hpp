#pragma once

// gradd's IR: a captured backward as a graph of values and ops.
//
// A graph holds two tables. `nodes` describes the autograd nodes found by the
// structural capture (type, edges, hooks, metadata, stock-engine order key);
// `ops` is the program over values, one op per step of the backward, in
// execution order. Node-level IR (from structural capture) has one
// `call_node` per autograd node call; functional-level IR (from functional
// capture) has one `apply_functional` per functional backward. Both use the
// same value and op vocabulary, taken from PyTorch's compiled autograd.

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace gradd::compiler {

/// Names one value of a graph. Value 0 is `no_value`: an undefined gradient.
using value_id = uint32_t;
inline constexpr value_id no_value = 0;

/// Marks an edge that leads nowhere (an input that does not require grad).
inline constexpr uint32_t no_node = UINT32_MAX;

/// What one op does.
enum class op_kind : uint8_t {
  graph_input,          ///< a lifted input (tensor, size, scalar); `index` says which
  call_node,            ///< run one autograd node; args: its inputs, results: its outputs
  validate_outputs,     ///< the stock engine's output check (shape, dtype, device)
  accumulate,           ///< gradient sum: results[0] = args[0] + args[1]
  accumulate_grad,      ///< into `.grad` of the leaf of node `node`
  tensor_pre_hook,      ///< the node's tensor pre-hooks and retain_grad hooks on its inputs
  pre_hook,             ///< the node's pre-hooks on its inputs
  post_hook,            ///< the node's post hooks; args: `index` outputs, then the inputs
  post_acc_grad_hook,   ///< the leaf's post-accumulate-grad hooks (AccumulateGrad only)
  copy_slices_prologue, ///< CopySlices, before its inner function
  copy_slices_epilogue, ///< CopySlices, after its inner function
  apply_functional,     ///< a functional backward, `target` its name
  unpack,               ///< a saved variable's unpack hook
  final_callbacks,      ///< callbacks queued with Engine::queue_callback
  output,               ///< the graph's outputs (`autograd::grad` results)
};

/// Returns the op kind's name as the text form writes it.
const char* to_string(op_kind kind) noexcept;

/// Whether ops of `kind` call hooks of the node they name.
constexpr bool is_hook(op_kind kind) noexcept {
  return kind == op_kind::tensor_pre_hook || kind == op_kind::pre_hook
         || kind == op_kind::post_hook || kind == op_kind::post_acc_grad_hook;
}

/// What a graph_input holds, after the seed's placeholders.
enum class input_kind : uint8_t {
  tensor,  ///< a lifted tensor
  size,    ///< a lifted size
  scalar,  ///< a lifted scalar
  packed,  ///< a saved variable packed by a pack hook, for an unpack op
};

/// Returns the input kind's name as the text form writes it.
const char* to_string(input_kind kind) noexcept;

/// Shape, dtype and device of a tensor, where known at capture.
struct tensor_meta {
  std::vector<int64_t> sizes;
  std::string dtype;   ///< e.g. "float"
  std::string device;  ///< e.g. "cpu", "cuda:0"
  bool known = true;   ///< false: an input with no metadata (undefined)
  friend bool operator==(const tensor_meta&, const tensor_meta&) = default;
};

/// One edge of an autograd node: gradient `i` of the node flows to input
/// `input_nr` of node `target` (or nowhere when `target == no_node`).
struct edge_ref {
  uint32_t target = no_node;
  uint32_t input_nr = 0;
  friend bool operator==(const edge_ref&, const edge_ref&) = default;
};

/// A gradient `autograd::grad` returns: input `input_nr` of the node, as
/// output `output_index` of the backward.
struct capture_ref {
  uint32_t input_nr = 0;
  uint32_t output_index = 0;
  friend bool operator==(const capture_ref&, const capture_ref&) = default;
};

/// How many hooks of each kind a node carries.
struct hook_counts {
  uint16_t tensor_pre = 0;    ///< Tensor::register_hook on the node's inputs
  uint16_t retains_grad = 0;  ///< retain_grad() on the node's inputs
  uint16_t pre = 0;           ///< Node::add_pre_hook
  uint16_t post = 0;          ///< Node::add_post_hook
  uint16_t post_acc_grad = 0; ///< post-accumulate-grad hook (AccumulateGrad only)
  friend bool operator==(const hook_counts&, const hook_counts&) = default;
};

/// An autograd node as captured.
struct node_info {
  std::string type_name;        ///< e.g. "torch::autograd::generated::MmBackward0"
  uint64_t sequence_nr = 0;     ///< the stock engine's ready-queue priority
  bool is_root = false;         ///< the GraphRoot holding the root gradients
  bool is_accumulate_grad = false;
  bool needed = true;           ///< runs (false: only its captures are taken)
  std::vector<edge_ref> edges;  ///< one per output gradient
  std::vector<capture_ref> captures;
  std::vector<tensor_meta> inputs;  ///< one per input gradient
  hook_counts hooks;
  friend bool operator==(const node_info&, const node_info&) = default;
};

/// One step of the program.
struct op {
  op_kind kind = op_kind::call_node;
  std::string target;              ///< call_node: node type; apply_functional: its name
  uint32_t node = no_node;         ///< the autograd node it belongs to
  int64_t index = -1;              ///< input/output index, where the kind has one
  std::vector<value_id> args;
  std::vector<value_id> results;
  tensor_meta meta{{}, {}, {}, false};  ///< graph_input: the lifted value, where known
  uint32_t id = 0;                  ///< stable name that survives passes moving ops (number_ops)
  input_kind input = input_kind::tensor;  ///< graph_input: what it holds; `index` its position
  bool custom_function = false;     ///< apply_functional: a custom autograd function's (user code)
  friend bool operator==(const op&, const op&) = default;
};

/// The op as the text form names it: `kind[target]`, a graph input's kind
/// in place of the target (`graph_input[tensor]`), `kind` alone where
/// there is neither.
std::string kind_text(const op& o);

/// A captured backward. Invariants are checked by `verify`.
struct graph {
  std::vector<node_info> nodes;
  std::vector<op> ops;
  uint32_t num_values = 1;       ///< values are 1 .. num_values - 1
  uint32_t num_outputs = 0;      ///< `autograd::grad` results
  bool keep_graph = false;       ///< retain_graph
  bool accumulate_grad = true;   ///< backward() (true) or grad() (false)
  bool exec_filter = false;      ///< inputs were given: only some nodes run

  /// Returns a fresh value.
  value_id new_value() noexcept { return num_values++; }

  /// Gives every op its position as `id`, so passes can find ops they move.
  void number_ops() noexcept {
    for (uint32_t i = 0; i < ops.size(); ++i)
      ops[i].id = i;
  }

  friend bool operator==(const graph&, const graph&) = default;
};

/// Whether `g` is node-level IR (it calls autograd nodes), as opposed to
/// functional-level IR (it applies functionals).
bool is_node_level(const graph& g) noexcept;

/// Writes the readable text form: one op per line, named values.
std::ostream& operator<<(std::ostream& out, const graph& g);

/// Returns the text form.
std::string to_text(const graph& g);

/// Checks that every value is defined once, before its uses, that each op
/// has the operands its kind needs, and that every gradient sum adds its
/// terms in the order the ops producing them run (the stock engine's order,
/// from lowering). Returns true when the graph is broken and writes why,
/// naming the op, to `why` if given.
bool verify(const graph& g, std::ostream* why = nullptr);

} // namespace gradd::compiler
