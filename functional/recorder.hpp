#pragma once

// What functional capture records while a backward runs: the table of the
// tensors in flight and gradd's PyCompilerInterface.
//
// Capture runs every node through `apply_with_saved` with its own tensors as
// proxies, so the tensors flowing between nodes are the real ones. The
// capture_session names each by the IR value that defined it (keyed by its
// TensorImpl) and appends ops to the recording. The recorder, installed as
// the process's PyCompilerInterface for the capture, runs each
// functional, CopySlices step and `.grad` update a node hands it and records
// it as one op whose arguments the session names.

#include "functional/graph.hpp"
#include "functional/recording.hpp"

#include <c10/util/intrusive_ptr.h>

#include <memory>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace torch::dynamo::autograd {
struct PyCompilerInterface;
}

namespace gradd::functional {

/// Returns an op of `kind` with `index`, belonging to `node`.
compiler::op make_op(compiler::op_kind kind, int64_t index = -1,
                     uint32_t node = compiler::no_node);

/// One capture in progress: the recording being built and the table that
/// names the tensors in flight.
class capture_session {
 public:
  capture_session(recording& rec, const graph& g) : recording_(rec), graph_(g) {}

  /// The node whose call is running; ops it records belong to it.
  uint32_t current_node = compiler::no_node;
  /// `.grad` updates (leaf, gradient), in execution order, applied once
  /// capture has succeeded.
  std::vector<std::pair<at::Tensor, at::Tensor>> deferred_accumulations;

  /// The name of the current node, for messages.
  std::string node_name() const;

  /// Returns the value `t` stands for (`no_value` if undefined). A tensor no
  /// op defined came from outside the recorded functionals: replay could not
  /// reproduce it, so capture fails naming its `role`.
  compiler::value_id value_of(const at::Tensor& t, std::string_view role) const;

  /// Defines a fresh value for `t`; `no_value` if undefined.
  compiler::value_id define(const at::Tensor& t);

  /// Defines a fresh value for each of `tensors`, in order.
  std::vector<compiler::value_id> define_all(const torch::autograd::variable_list& tensors);

  /// Appends `o` and its payload, as part of the current node unless `o`
  /// names one.
  void emit(compiler::op o, op_payload payload = {});

  /// Returns the lifted position of `t`; fails if it was not lifted.
  uint32_t lifted_position(const at::Tensor& t) const;

  /// Emits one graph_input per lifted tensor.
  void add_lifted(const std::vector<at::Tensor>& lifted);

 private:
  recording& recording_;
  const graph& graph_;
  std::unordered_map<const c10::TensorImpl*,
                     std::pair<compiler::value_id, c10::weak_intrusive_ptr<c10::TensorImpl>>>
      values_;
  std::unordered_map<const c10::TensorImpl*, uint32_t> lifted_;
};

/// Returns gradd's PyCompilerInterface for a capture: it runs what a node
/// hands it and records it in `session`.
std::unique_ptr<torch::dynamo::autograd::PyCompilerInterface> make_recorder(
    capture_session& session);

} // namespace gradd::functional
