#pragma once

// The node libtorch reports as the one being run (Note [The current node]).

#include <memory>

namespace torch::autograd {
struct Node;
}

namespace gradd::execute {

/// Whether gradd can set libtorch's current node on this build of
/// libtorch; where it cannot, nodes that plans run see the caller's.
bool current_node_reachable() noexcept;

/// Makes each node a plan runs the current node, as the stock engine's
/// NodeGuard does around every node it runs, and gives the caller's back
/// when the scope ends. One scope per run of nodes, on the running thread.
class current_node_scope {
public:
  current_node_scope();
  ~current_node_scope();
  current_node_scope(const current_node_scope&) = delete;
  current_node_scope& operator=(const current_node_scope&) = delete;

  /// `fn` is the current node from now on.
  void enter(torch::autograd::Node& fn);

private:
  std::shared_ptr<torch::autograd::Node>* slot_;  ///< null where not reachable
  std::shared_ptr<torch::autograd::Node> callers_;
};

} // namespace gradd::execute
