// Every construct a plan must run, against the stock engine, bitwise: in
// float64 and float32 on the CPU, and on CUDA where there is a GPU.

#include "engine/grad_check.hpp"

#include <torch/csrc/autograd/engine.h>

#include <cmath>

namespace {

using gradd::test::check_against_stock;
using torch::Tensor;

/// Leaf tensors for a case, on `device` in `dtype`, from a fixed seed.
struct leaves {
  leaves(torch::Device device, torch::Dtype dtype, std::vector<std::vector<int64_t>> shapes) {
    torch::manual_seed(7);
    for (auto& shape : shapes)
      tensors.push_back(
          torch::randn(shape, torch::dtype(dtype)).to(device).requires_grad_());
  }
  Tensor operator[](size_t i) const { return tensors[i]; }
  std::vector<Tensor> tensors;
};

struct scale_and_drop : torch::autograd::Function<scale_and_drop> {
  static Tensor forward(torch::autograd::AutogradContext* ctx, Tensor a, Tensor b) {
    ctx->save_for_backward({a, b});
    return a * b + a;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    // The gradient for b is deliberately undefined.
    return {grads[0] * (saved[1] + 1), Tensor()};
  }
};

using case_fn = void (*)(torch::Device, torch::Dtype);

void builtin_ops(torch::Device device, torch::Dtype dtype) {
  leaves p(device, dtype, {{8, 6}, {6, 5}, {5}});
  auto s = check_against_stock(p.tensors, [&] {
    auto h = torch::tanh(torch::mm(p[0], p[1]) + p[2]);
    auto parts = torch::split(h, 2, 1);
    auto g = torch::cat({torch::relu(parts[0]), torch::sigmoid(parts[1]) * parts[2].exp()}, 1);
    auto idx = torch::tensor({0, 2, 4}, torch::dtype(torch::kLong).device(device));
    auto picked = g.t().index_select(1, idx).softmax(0);
    auto loss = picked.pow(2).sum() + g.log1p().abs().mean() + h.sum();
    loss.backward();
    return std::vector<Tensor>{};
  });
  CHECK(s.plan_backwards == 2);
  CHECK(s.eager_backwards == 0);
  CHECK(s.cache_misses == 1);
  CHECK(s.cache_hits == 1);
}

void accumulate_into_existing_grad(torch::Device device, torch::Dtype dtype) {
  leaves p(device, dtype, {{4, 3}, {3}});
  p[0].mutable_grad() = torch::ones({4, 3}, torch::dtype(dtype).device(device));
  auto s = check_against_stock(p.tensors, [&] {
    ((p[0] * p[1]).sum() + (p[0] * 3).sum()).backward();
    return std::vector<Tensor>{};
  });
  CHECK(s.plan_backwards == 2);
}

void non_contiguous_leaf(torch::Device device, torch::Dtype dtype) {
  // The layout contract: .grad takes the strides of its (transposed) leaf.
  torch::manual_seed(3);
  auto w = torch::randn({3, 5}, torch::dtype(dtype)).to(device).t().detach().requires_grad_();
  auto x = torch::randn({2, 5}, torch::dtype(dtype)).to(device);
  auto s = check_against_stock({w}, [&] {
    torch::mm(x, w).pow(2).sum().backward();
    return std::vector<Tensor>{};
  });
  CHECK(s.plan_backwards == 2);
}

void copy_slices(torch::Device device, torch::Dtype dtype) {
  leaves p(device, dtype, {{6, 4}, {2, 4}});
  auto s = check_against_stock(p.tensors, [&] {
    auto y = p[0] * 2;
    y.narrow(0, 1, 2).mul_(p[1]);  // in place on a view: CopySlices
    (y * y).sum().backward();
    return std::vector<Tensor>{};
  });
  CHECK(s.plan_backwards == 2);
}

void custom_function_and_undefined_grad(torch::Device device, torch::Dtype dtype) {
  leaves p(device, dtype, {{5}, {5}});
  auto s = check_against_stock(p.tensors, [&] {
    scale_and_drop::apply(p[0], p[1]).pow(2).sum().backward();
    return std::vector<Tensor>{};
  });
  CHECK(!p[1].grad().defined());
  CHECK(s.plan_backwards == 2);
}

void tensor_hooks_and_retain_grad(torch::Device device, torch::Dtype dtype) {
  leaves p(device, dtype, {{4, 4}, {4}});
  p[0].register_hook([](Tensor g) { return g * 2; });
  auto s = check_against_stock(p.tensors, [&] {
    auto h = torch::tanh(p[0] + p[1]);
    h.retain_grad();
    h.register_hook([](Tensor g) { return g + 1; });
    auto out = (h * h).sum();
    out.retain_grad();
    out.backward();
    return std::vector<Tensor>{h.grad(), out.grad()};
  });
  CHECK(s.plan_backwards == 2);
}

void final_callbacks(torch::Device device, torch::Dtype dtype) {
  leaves p(device, dtype, {{3, 3}});
  auto s = check_against_stock(p.tensors, [&] {
    std::vector<Tensor> seen;
    auto x = p[0] * 3;
    x.register_hook([&seen](Tensor g) {
      auto& engine = torch::autograd::Engine::get_default_engine();
      engine.queue_callback([&seen] {
        seen.push_back(torch::full({1}, 1.0));
        // Queued by a callback: runs after the current ones.
        torch::autograd::Engine::get_default_engine().queue_callback(
            [&seen] { seen.push_back(torch::full({1}, 3.0)); });
      });
      engine.queue_callback([&seen] { seen.push_back(torch::full({1}, 2.0)); });
      return g;
    });
    x.sum().backward();
    REQUIRE(seen.size() == 3);
    return seen;
  });
  CHECK(s.plan_backwards == 2);
}

void grad_with_inputs(torch::Device device, torch::Dtype dtype) {
  leaves p(device, dtype, {{4, 4}, {4}, {4}});
  auto s = check_against_stock(p.tensors, [&] {
    auto h = torch::relu(torch::mv(p[0], p[1]));
    auto loss = (h * p[2]).sum() + h.exp().sum();
    // Only the subgraph leading to p[1] and h runs; .grad stays untouched.
    return torch::autograd::grad({loss}, {p[1], h});
  });
  for (const auto& t : p.tensors)
    CHECK(!t.grad().defined());
  CHECK(s.plan_backwards == 2);
}

void grad_of_an_unused_input(torch::Device device, torch::Dtype dtype) {
  leaves p(device, dtype, {{4}, {4}, {3}});
  auto s = check_against_stock(p.tensors, [&] {
    auto y = (p[0] * p[1]).sum();
    // p[2] is not in the graph: its gradient is undefined (allow_unused).
    return torch::autograd::grad({y}, {p[0], p[2]}, {}, std::nullopt, false, true);
  });
  CHECK(s.plan_backwards == 2);
}

void backward_with_inputs(torch::Device device, torch::Dtype dtype) {
  leaves p(device, dtype, {{4, 4}, {4}});
  auto s = check_against_stock(p.tensors, [&] {
    auto loss = torch::mv(p[0], p[1]).pow(2).sum();
    torch::autograd::backward({loss}, {}, std::nullopt, false, {p[0]});
    return std::vector<Tensor>{};
  });
  CHECK(!p[1].grad().defined());
  CHECK(s.plan_backwards == 2);
}

void several_roots(torch::Device device, torch::Dtype dtype) {
  leaves p(device, dtype, {{3, 4}, {4}});
  auto s = check_against_stock(p.tensors, [&] {
    auto a = torch::mv(p[0], p[1]);
    auto b = (p[0] * p[1]).sum(0);
    torch::autograd::backward({a, b}, {torch::ones_like(a), torch::full_like(b, 0.5)});
    return std::vector<Tensor>{};
  });
  CHECK(s.plan_backwards == 2);
}

void retain_graph(torch::Device device, torch::Dtype dtype) {
  leaves p(device, dtype, {{5, 5}});
  auto s = check_against_stock(p.tensors, [&] {
    auto loss = torch::sigmoid(p[0].matmul(p[0])).sum();
    loss.backward({}, /*retain_graph=*/true);
    loss.backward();
    return std::vector<Tensor>{};
  });
  CHECK(s.plan_backwards == 4);
  CHECK(s.cache_misses == 2);  // retain_graph is part of the structure
}

const std::vector<std::pair<const char*, case_fn>>& cases() {
  static const std::vector<std::pair<const char*, case_fn>> all{
      {"built-in nodes", builtin_ops},
      {"AccumulateGrad into an existing grad", accumulate_into_existing_grad},
      {"AccumulateGrad on a non-contiguous leaf", non_contiguous_leaf},
      {"CopySlices", copy_slices},
      {"custom C++ function with an undefined gradient", custom_function_and_undefined_grad},
      {"tensor hooks and retain_grad", tensor_hooks_and_retain_grad},
      {"final callbacks in order", final_callbacks},
      {"autograd::grad with inputs", grad_with_inputs},
      {"autograd::grad of an unused input", grad_of_an_unused_input},
      {"backward with inputs", backward_with_inputs},
      {"several roots", several_roots},
      {"retain_graph true then false", retain_graph},
  };
  return all;
}

void run_all(torch::Device device, torch::Dtype dtype) {
  for (const auto& [name, run] : cases()) {
    DYNAMIC_SECTION(name << " on " << device << " in " << dtype) {
      run(device, dtype);
    }
  }
}

} // namespace

TEST_CASE("plans give the stock engine's gradients bitwise in float64", "[engine]") {
  run_all(torch::kCPU, torch::kFloat64);
}

TEST_CASE("plans give the stock engine's gradients bitwise in float32", "[engine]") {
  run_all(torch::kCPU, torch::kFloat32);
}

TEST_CASE("plans give the stock engine's gradients bitwise on CUDA", "[engine][cuda]") {
  if (!torch::cuda::is_available()) {
    WARN("CUDA not available: CUDA cases skipped");
    return;
  }
  run_all(torch::kCUDA, torch::kFloat32);
  run_all(torch::kCUDA, torch::kFloat64);
}

TEST_CASE("CUDA graphs give the stock engine's gradients bitwise", "[engine][cuda][graphs]") {
  if (!torch::cuda::is_available()) {
    WARN("CUDA not available: CUDA graph cases skipped");
    return;
  }
  gradd::test::graphs_under_test_scope graphs;
  for (auto dtype : {torch::kFloat32, torch::kFloat64}) {
    for (const auto& [name, run] : cases()) {
      DYNAMIC_SECTION(name << " in " << dtype) {
        run(torch::kCUDA, dtype);
        auto s = gradd::stats();
        // Served by a graph (hooks cut it: Note [Piecewise graphs]), or
        // refused by the capture with its reason counted (then plans serve
        // it, bitwise as checked above).
        CHECK(s.graph_recordings >= 1);
        CHECK(s.graph_backwards + s.graph_capture_failures >= 1);
        if (s.graph_backwards == 0)
          WARN(name << ": its capture failed, plans serve it");
      }
    }
  }
}

TEST_CASE("the oracle tells -0.0 from 0.0 and holds NaN gradients", "[engine]") {
  // -0.0 * 1 = -0.0: a gradient of negative zeros; sqrt'(0) * 0 = NaN.
  auto x = torch::tensor({0.0, 1.0, 4.0}, torch::kFloat32).requires_grad_();
  auto z = torch::ones({3}, torch::kFloat32).requires_grad_();
  auto s = check_against_stock({x, z}, [&] {
    (z * -0.0f).sum().backward();
    (x.sqrt() * torch::tensor({0.0f, 1.0f, 1.0f})).sum().backward();
    return std::vector<Tensor>{};
  });
  CHECK(s.plan_backwards == 4);
  CHECK(std::isnan(x.grad()[0].item<float>()));
  CHECK(std::signbit(z.grad()[0].item<float>()));
  CHECK(!torch::equal(gradd::test::bits_of(torch::tensor({-0.0f})),
                      gradd::test::bits_of(torch::tensor({0.0f}))));
}
