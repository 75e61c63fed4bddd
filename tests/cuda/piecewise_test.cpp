// Graphs cut at nodes with hooks (Note [Piecewise graphs],
// cuda/piecewise.cpp): a tensor hook that scales an activation's
// gradient and keeps what it was given, retain_grad on another, a post-hook
// that watches a node's outputs. Graphs serve the structure in pieces, each
// hooked node called live between them, and every gradient, retained
// gradient and kept tensor is the stock engine's, bitwise; a hook that
// returns another layout than at capture has the rest of that backward run
// eagerly, still bitwise.

#include "cuda/graph_loop.hpp"

#include <torch/csrc/autograd/utils/lambda_post_hook.h>

using gradd::test::clear_grads;
using gradd::test::grads_of;
using gradd::test::have_cuda;
using gradd::test::mlp;
using gradd::test::policy;
using torch::Tensor;
using torch::autograd::variable_list;

namespace {

/// What the hooks of one step saw and kept.
struct hook_state {
  std::vector<Tensor> kept;  ///< the gradients the tensor hook was given, not cloned
  bool current_node_held = true;  ///< the post-hook ran as its node
  bool transpose = false;    ///< the post-hook returns its output transposed in memory
};

/// The mlp's forward with hooks on its activations; returns the loss and
/// the activation that retains its gradient.
std::pair<Tensor, Tensor> hooked_forward(const mlp& m, int64_t batch, int64_t step,
                                         hook_state& state) {
  auto x = m.hidden(batch, step, 1);
  x.register_hook([&state](Tensor g) {
    state.kept.push_back(g);  // a pool's memory would change under it at the next replay
    return g * 2;
  });
  auto h = torch::gelu(torch::addmm(m.biases[1], x, m.weights[1]));
  h.retain_grad();
  auto out = torch::gelu(torch::addmm(m.biases[2], h, m.weights[2]));
  auto node = out.grad_fn();
  node->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
      [&state, raw = node.get()](const variable_list& outputs, const variable_list&) {
        state.current_node_held =
            state.current_node_held && torch::autograd::get_current_node().get() == raw;
        if (!state.transpose)
          return outputs;
        auto changed = outputs;  // same values, strides (1, batch)
        changed[0] = outputs[0].t().contiguous().t();
        return changed;
      }));
  return {out.square().mean(), h};
}

} // namespace

TEST_CASE("graphs cut at nodes with hooks call them live between pieces", "[cuda][graphs]") {
  if (!have_cuda())
    return;
  mlp m;
  auto params = m.parameters();
  hook_state state;
  std::vector<size_t> transposed_steps;
  auto step = [&](size_t i) {
    clear_grads(params);
    state.transpose = std::find(transposed_steps.begin(), transposed_steps.end(), i)
                      != transposed_steps.end();
    auto [loss, retained] = hooked_forward(m, 8, static_cast<int64_t>(i), state);
    loss.backward();
    auto out = grads_of(params);
    out.push_back(retained.grad().clone());
    out.push_back(torch::tensor(state.current_node_held));
    state.current_node_held = true;
    return out;
  };

  SECTION("every gradient, retained gradient and kept tensor bitwise") {
    auto s = gradd::test::compare_steps(policy(gradd::graph_shape_policy::static_shapes), 6, step);
    CHECK(s.graph_backwards >= 3);
    CHECK(s.piecewise_backwards == s.graph_backwards);
    CHECK(s.graph_eager_rests == 0);
    auto all = gradd::graph_stats();
    REQUIRE(all.size() == 1);
    CHECK(all[0].plans_only.empty());
    CHECK(all[0].graph_pieces == 4);  // cut at the three hooked GeluBackward0 nodes
    CHECK(all[0].live_nodes == 3);
    CHECK(all[0].cuts.find("GeluBackward0: hooks") != std::string::npos);
    // Kept by the hook across steps: the stock engine's and gradd's, step
    // by step, still equal after every later backward.
    REQUIRE(state.kept.size() == 12);
    std::vector<Tensor> stock(state.kept.begin(), state.kept.begin() + 6);
    std::vector<Tensor> ours(state.kept.begin() + 6, state.kept.end());
    gradd::test::require_bitwise_equal(stock, ours);
  }
  SECTION("a hook that returns another layout: that backward's rest runs eagerly") {
    transposed_steps = {4};
    auto s = gradd::test::compare_steps(policy(gradd::graph_shape_policy::static_shapes), 6, step);
    CHECK(s.graph_eager_rests == 1);
    CHECK(s.graph_backwards >= 3);
    CHECK(s.piecewise_backwards == s.graph_backwards);
  }
  SECTION("with cuda_graphs.max_cuts below its cuts the structure stays on plans") {
    auto p = policy(gradd::graph_shape_policy::static_shapes);
    p.cuda_graphs.max_cuts = 2;
    auto s = gradd::test::compare_steps(p, 4, step);
    CHECK(s.graph_backwards == 0);
    auto all = gradd::graph_stats();
    REQUIRE(all.size() == 1);
    CHECK(all[0].plans_only.find("cut at 3 nodes") != std::string::npos);
  }
}
