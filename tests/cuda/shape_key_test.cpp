// The shape key (cuda/shape_key.hpp) of a backward that saved a Python
// number (Note [Python scalars in graphs]): the number is lifted still
// marked as wrapped, and its value is part of the key. Lifting is the same
// on every device, so these run on CPU tensors (graph_look.hpp).

#include "cuda/graph_look.hpp"
#include "cuda/shape_key.hpp"

#include <catch2/catch.hpp>
#include <torch/csrc/dynamo/compiled_autograd.h>

#include <optional>

using gradd::cuda::backward_nodes;
using gradd::test::look_at_graph;
using torch::Tensor;

namespace {

/// `number` as Python hands it to an op: a 0-dim CPU tensor marked wrapped.
Tensor python_number(double number) {
  auto wrapped = torch::scalar_tensor(number, torch::kFloat64);
  wrapped.unsafeGetTensorImpl()->set_wrapped_number(true);
  return wrapped;
}

/// What the graph path's lift of `mm(x, w) * scale` gives: its shape key,
/// and how many of its lifted tensors are wrapped scalars.
struct lift_of_scaled {
  std::optional<uint64_t> key;
  size_t wrapped = 0;
};

lift_of_scaled lift_scaled_by(const Tensor& scale) {
  torch::manual_seed(5);
  auto w = torch::randn({8, 4}).requires_grad_();
  auto loss = (torch::mm(torch::randn({6, 8}), w) * scale).square().mean();
  lift_of_scaled out;
  bool looked = false;
  look_at_graph([&] { loss.backward(); },
                [&](const backward_nodes& b) {
                  looked = true;
                  namespace ca = torch::dynamo::autograd;
                  ca::AutogradCompilerCall call(ca::SizeInput::STATIC);
                  auto nodes = gradd::functional::lift_nodes_hashed(call, b.nodes, b.table);
                  out.key = gradd::cuda::shape_key(call, nodes);
                  for (const auto& t : call.tensor_args.inputs)
                    out.wrapped += gradd::cuda::wrapped_scalar(t);
                });
  REQUIRE(looked);
  return out;
}

} // namespace

TEST_CASE("a Python number saved by a backward is lifted as one, its value in the shape key",
          "[engine][graphs]") {
  auto half = lift_scaled_by(python_number(0.5));
  REQUIRE(half.key);
  CHECK(half.wrapped == 1);  // MulBackward0's `other`
  CHECK(lift_scaled_by(python_number(0.5)).key == half.key);
  CHECK(lift_scaled_by(python_number(0.25)).key != half.key);
  // A 0-dim CPU tensor made as a tensor is no Python number: the graph path
  // still refuses it.
  CHECK(lift_scaled_by(torch::scalar_tensor(0.5, torch::kFloat64)).wrapped == 0);
}
