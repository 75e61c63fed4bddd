// The recording a piecewise CUDA graph is captured from (Note [Piecewise
// graphs], cuda/piecewise.cpp), on the CPU: a node with a hook is not
// lifted and is recorded as one call_node op returning what it returned
// when the backward ran; interpreting the recording with that node called
// live gives the stock engine's gradients bitwise, and so does stopping at
// the node and running the rest from the values in flight past it
// (functional::interpret_rest, what a replay does where the node's outputs
// do not fit the next piece).

#include "capture/capture_graph.hpp"
#include "capture/graph_walk.hpp"
#include "compiler/exec_info.hpp"
#include "engine/grad_check.hpp"
#include "execute/stock_steps.hpp"
#include "functional/capture.hpp"
#include "functional/functional_hooks.hpp"
#include "functional/interpret.hpp"
#include "functional/steps.hpp"

#include <catch2/catch.hpp>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/dynamo/compiled_autograd.h>
#include <torch/torch.h>

#include <algorithm>

namespace {

namespace functional = gradd::functional;
using gradd::compiler::op_kind;
using torch::autograd::variable_list;

/// Thrown by a call_node callback to stop an interpretation at the cut.
struct stop_at_cut {
  uint32_t at;
  variable_list inputs;
  std::vector<at::Tensor> in_flight;
};

/// How the recording is run.
enum class run { whole, rest_from_cut };

/// The hook the engine calls, which a function pointer cannot capture.
using backward_fn = std::function<variable_list(
    const std::shared_ptr<torch::autograd::Node>&, const torch::autograd::GraphTask&, bool,
    const torch::autograd::edge_list&)>;
backward_fn& current_hook() {
  static backward_fn hook;
  return hook;
}
variable_list call_current_hook(const std::shared_ptr<torch::autograd::Node>& root,
                                const torch::autograd::GraphTask& task, bool accumulate_grad,
                                const torch::autograd::edge_list& outputs) {
  return current_hook()(root, task, accumulate_grad, outputs);
}

} // namespace

TEST_CASE("a recording cut at a hooked node runs it live and resumes past it, bitwise",
          "[engine][graphs]") {
  auto mode = GENERATE(run::whole, run::rest_from_cut);
  auto on = torch::dtype(torch::kFloat64);
  torch::manual_seed(3);
  std::vector<torch::Tensor> params;
  for (int i = 0; i < 3; ++i)
    params.push_back(torch::randn({6, 6}, on).requires_grad_());
  auto x = torch::randn({4, 6}, on);
  // `side` is made first, so its node runs after the hooked one (the
  // stock engine runs the highest sequence number first): its gradient is
  // in flight past the cut.
  auto side = x.mm(params[2]);
  auto h = x.mm(params[0]);
  h.register_hook([](torch::Tensor g) { return g * 2; });
  auto hooked = h.grad_fn();
  variable_list returned;  // what the hooked node returned when the stock engine ran it
  hooked->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
      [&returned](const variable_list& outputs, const variable_list&) {
        returned = outputs;
        return outputs;
      }));
  auto loss = (h.tanh() + side).mm(params[1]).square().sum();

  gradd::test::clear_grads(params);
  loss.backward({}, /*retain_graph=*/true);
  auto stock = gradd::test::grads_of(params);
  REQUIRE(returned.size() == 2);

  gradd::test::clear_grads(params);
  size_t cut_ops = 0;
  std::vector<size_t> rest_leaves;  // leaf positions interpret_rest counted
  {
    current_hook() = [&](const std::shared_ptr<torch::autograd::Node>& root,
                         const torch::autograd::GraphTask& task, bool accumulate_grad,
                         const torch::autograd::edge_list& outputs) {
      at::NoGradGuard no_grad;
      functional::graph g;
      gradd::capture::walk_graph(*root, outputs, task.keep_graph_, accumulate_grad, 0,
                                        g.walk);
      g.ir = gradd::capture::capture_graph(g.walk, task, outputs, accumulate_grad).ir;
      gradd::compiler::mark_needed_nodes(g.ir);
      std::vector<variable_list> cut_outputs(g.ir.nodes.size());
      for (uint32_t i = 0; i < g.ir.nodes.size(); ++i)
        if (functional::cut_at(g.ir.nodes[i], g.node(i)))
          cut_outputs[i] = returned;
      REQUIRE(std::count_if(cut_outputs.begin(), cut_outputs.end(),
                            [](const variable_list& v) { return !v.empty(); }) == 1);
      torch::dynamo::autograd::AutogradCompilerCall call(
          torch::dynamo::autograd::SizeInput::STATIC);
      functional::lift_nodes_hashed(call, g.walk.nodes, g.ir);
      auto rec = functional::record_lifted(call, g, task, outputs.size(),
                                           c10::Stream(c10::Stream::DEFAULT, c10::Device(c10::kCPU)),
                                           cut_outputs);
      cut_ops = static_cast<size_t>(std::count_if(
          rec.ir.ops.begin(), rec.ir.ops.end(),
          [](const gradd::compiler::op& o) { return o.kind == op_kind::call_node; }));
      const auto& lifted = call.tensor_args.inputs;
      auto call_live = [&](uint32_t at, variable_list inputs) {
        return gradd::execute::call_function(*g.walk.nodes[rec.ir.ops[at].node],
                                                    std::move(inputs), /*keep_graph=*/true);
      };
      functional::interpret_options options;  // leaves accumulate into `.grad`
      if (mode == run::whole) {
        options.call_node = [&](uint32_t at, variable_list inputs,
                                const std::vector<at::Tensor>&) { return call_live(at, inputs); };
        functional::interpret(rec, g.walk.nodes, lifted, options);
        return variable_list(outputs.size());
      }
      options.call_node = [](uint32_t at, variable_list inputs,
                             const std::vector<at::Tensor>& in_flight) -> variable_list {
        throw stop_at_cut{at, std::move(inputs), in_flight};
      };
      try {
        functional::interpret(rec, g.walk.nodes, lifted, options);
        FAIL("the recording has no cut");
      } catch (stop_at_cut& stop) {
        const auto& cut = rec.ir.ops[stop.at];
        auto values = stop.in_flight;
        auto returned_live = call_live(stop.at, stop.inputs);
        for (size_t k = 0; k < cut.results.size(); ++k)
          if (cut.results[k] != gradd::compiler::no_value)
            values[cut.results[k]] = returned_live[k];
        // Collected, then accumulated as they come, with their positions.
        functional::interpret_options rest;
        rest.leaves = functional::leaf_gradients::collect;
        rest.call_node = options.call_node;
        rest.after_leaf = [&](size_t leaf, at::Tensor& gradient) {
          rest_leaves.push_back(leaf);
          size_t seen = 0;
          for (const auto& o : rec.ir.ops)
            if (o.kind == op_kind::accumulate_grad && seen++ == leaf && gradient.defined())
              functional::accumulate_into_grad(lifted.at(o.index), std::move(gradient));
        };
        functional::interpret_rest(rec, g.walk.nodes, lifted, rest, stop.at + 1, std::move(values));
      }
      return variable_list(outputs.size());
    };
    gradd::test::hook_scope hook(call_current_hook);
    loss.backward();
  }
  CHECK(cut_ops == 1);
  gradd::test::require_bitwise_equal(stock, gradd::test::grads_of(params));
  if (mode == run::rest_from_cut) {
    // After the cut: its own leaf, then the one past it; the first leaf
    // came before it.
    CHECK(rest_leaves == std::vector<size_t>{1, 2});
  }
}
