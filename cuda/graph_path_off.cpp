// The graph path of a build without the CUDA toolkit: every backward stays
// on its plan (see graph_path.hpp).

#include "cuda/capture_gate.hpp"
#include "cuda/graph_path.hpp"

#include <ATen/detail/CUDAHooksInterface.h>

namespace gradd::cuda {

struct placed_bet {};

void placed_bet_deleter::operator()(placed_bet* bet) const noexcept {
  delete bet;
}

early_bet bet_before_engine(uint64_t, const compiler::graph&,
                            const std::vector<torch::autograd::Node*>&, const settings&,
                            std::chrono::steady_clock::time_point) {
  return nullptr;
}

early_bet bet_before_walk(uint64_t, const compiler::graph&,
                          const std::vector<torch::autograd::Node*>&, const settings&,
                          c10::Stream) {
  return nullptr;
}

std::optional<torch::autograd::variable_list> serve_from_graph(const graph_call&) {
  return std::nullopt;
}

std::optional<bet_served> serve_bet(early_bet&, const bet_call&) {
  return std::nullopt;
}

at::Tensor shared_seed(const at::Tensor&) {
  return {};
}

void add_graph_statistics(statistics&) {}

void add_graph_coverage(graph_statistics&) {}

void reset_graph_statistics() {}

void drop_graphs() {}

bool wait_graph_captures(std::chrono::milliseconds) {
  return true;
}

bool drain_graph_captures(std::chrono::milliseconds) {
  return true;
}

void synchronize_after_captures() {  // no captures without the CUDA toolkit
  const auto& hooks = at::detail::getCUDAHooks();
  hooks.deviceSynchronize(hooks.getCurrentDevice());
}

} // namespace gradd::cuda
