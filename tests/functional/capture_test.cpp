// Functional capture and replay, compared bitwise with the stock engine.
//
// Each case installs its own compiled-autograd hook: a first iteration runs
// through functional::capture, a later one (new inputs, same structure)
// through functional::replay, and each is compared with the stock engine run
// on the same inputs and parameters, in float64 and float32, on the CPU and,
// where there is one, on CUDA.

#include "compiler/pass_manager.hpp"
#include "engine/grad_check.hpp"
#include "functional/functional_hooks.hpp"
#include "functional/passes.hpp"
#include "functional/registry.hpp"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <set>
#include <sstream>

namespace {

namespace functional = gradd::functional;
using gradd::compiler::op_kind;
using gradd::test::capture_hook;
using gradd::test::clear_grads;
using gradd::test::grads_of;
using gradd::test::hook_scope;
using gradd::test::replay_hook;
using gradd::test::require_bitwise_equal;
using gradd::test::set_grads;
using torch::autograd::variable_list;

/// The recording capture_hook writes and replay_hook reads.
auto& recording = gradd::test::last_recording();

using batch = std::vector<torch::Tensor>;

/// A model under test: its parameters, a batch for a seed, and the loss.
struct model {
  std::vector<torch::Tensor> params;
  std::function<batch(int64_t seed, int64_t rows)> make_batch;
  std::function<torch::Tensor(const batch&)> loss;
};

torch::TensorOptions options_for(torch::Dtype dtype, torch::Device device) {
  return torch::TensorOptions().dtype(dtype).device(device);
}

std::function<batch(int64_t, int64_t)> batch_maker(torch::Dtype dtype, torch::Device device,
                                                   int64_t features, int64_t targets) {
  return [=](int64_t seed, int64_t rows) {
    torch::manual_seed(seed);
    auto options = options_for(dtype, device);
    return batch{torch::randn({rows, features}, options), torch::randn({rows, targets}, options)};
  };
}

/// Three Linear layers with relu and tanh between them, mean squared error.
model make_mlp(torch::Dtype dtype, torch::Device device) {
  torch::manual_seed(0);
  torch::nn::Sequential net(torch::nn::Linear(6, 16), torch::nn::Functional(torch::relu),
                            torch::nn::Linear(16, 16), torch::nn::Functional(torch::tanh),
                            torch::nn::Linear(16, 3));
  net->to(device, dtype);
  return {net->parameters(), batch_maker(dtype, device, 6, 3),
          [net](const batch& b) mutable { return torch::mse_loss(net->forward(b[0]), b[1]); }};
}

/// Two branches joined by cat; `h` is used three times and `first` is
/// applied twice, so gradients are summed both between nodes and into a leaf.
model make_branchy(torch::Dtype dtype, torch::Device device) {
  torch::manual_seed(0);
  torch::nn::Linear first(6, 8), second(6, 8), last(24, 3);
  for (auto* layer : {&first, &second, &last})
    (*layer)->to(device, dtype);
  std::vector<torch::Tensor> params;
  for (auto* layer : {&first, &second, &last})
    for (const auto& p : (*layer)->parameters())
      params.push_back(p);
  auto loss = [=](const batch& b) mutable {
    auto h = torch::tanh(first(b[0]));
    auto g = torch::relu(second(b[0])) + torch::sigmoid(first(b[0] * 0.5));
    auto z = torch::cat({h, g, h * g}, 1);
    return last(z).pow(2).sum() + h.mean();
  };
  return {params, batch_maker(dtype, device, 6, 3), loss};
}

/// A Linear layer whose output is written in place through a view (CopySlices).
model make_in_place_view(torch::Dtype dtype, torch::Device device) {
  torch::manual_seed(0);
  torch::nn::Linear layer(6, 5);
  layer->to(device, dtype);
  auto loss = [=](const batch& b) mutable {
    auto y = layer(b[0]).clone();
    y.narrow(1, 1, 2).mul_(3);
    return (y * y).sum();
  };
  return {layer->parameters(), batch_maker(dtype, device, 6, 5), loss};
}

/// Runs backward() of `m` on `b`, on the stock engine and then through
/// `hook`, each from `.grad` = `initial`; requires the same `.grad` bitwise
/// and returns the stock engine's.
std::vector<torch::Tensor> backward_matches_stock(
    const model& m, const batch& b, torch::autograd::Engine::compiled_autograd_fn hook,
    const std::vector<torch::Tensor>& initial) {
  set_grads(m.params, initial);
  m.loss(b).backward();
  auto stock = grads_of(m.params);
  set_grads(m.params, initial);
  {
    hook_scope on(hook);
    m.loss(b).backward();
  }
  require_bitwise_equal(stock, grads_of(m.params));
  return stock;
}

/// Runs autograd::grad() of `m` on `b` for its parameters, on the stock
/// engine and then through `hook`; requires the same results bitwise.
void grad_matches_stock(const model& m, const batch& b,
                        torch::autograd::Engine::compiled_autograd_fn hook) {
  auto stock = torch::autograd::grad({m.loss(b)}, m.params);
  variable_list result;
  {
    hook_scope on(hook);
    result = torch::autograd::grad({m.loss(b)}, m.params);
  }
  require_bitwise_equal(stock, result);
}

size_t count_kind(const functional::recording& rec, op_kind kind) {
  return std::count_if(rec.ir.ops.begin(), rec.ir.ops.end(),
                       [kind](const auto& o) { return o.kind == kind; });
}

/// Checks the recording's shape: a valid IR whose functional calls name the
/// nodes' functionals and take the lifted tensors as graph inputs.
void check_recording(const functional::recording& rec,
                     const std::vector<std::string>& expected_functionals) {
  INFO(gradd::compiler::to_text(rec.ir));
  std::ostringstream why;
  REQUIRE_FALSE(gradd::compiler::verify(rec.ir, &why));
  REQUIRE(rec.payloads.size() == rec.ir.ops.size());
  REQUIRE(count_kind(rec, op_kind::graph_input) == rec.num_lifted);

  std::vector<op_kind> defined_by(rec.ir.num_values, op_kind::output);
  for (const auto& o : rec.ir.ops)
    for (auto v : o.results)
      if (v != gradd::compiler::no_value)
        defined_by[v] = o.kind;

  std::set<std::string> functionals;
  size_t lifted_arguments = 0;
  size_t constant_arguments = 0;
  for (size_t i = 0; i < rec.ir.ops.size(); ++i) {
    const auto& o = rec.ir.ops[i];
    if (o.kind != op_kind::apply_functional)
      continue;
    INFO("op " << i << ": " << o.target);
    functionals.insert(o.target);
    const auto& payload = rec.payloads[i];
    REQUIRE(payload.fn);
    REQUIRE(functional::bound_functional(o.target).fn == payload.fn);
    for (const auto& arg : payload.packed) {
      if (arg.tensors.empty()) {
        ++constant_arguments;
        continue;
      }
      for (auto v : arg.tensors) {
        if (v == gradd::compiler::no_value)
          continue;
        REQUIRE(defined_by[v] == op_kind::graph_input);
        ++lifted_arguments;
      }
    }
  }
  for (const auto& name : expected_functionals) {
    INFO("functional " << name);
    CHECK(functionals.count(name) == 1);
  }
  CHECK(lifted_arguments > 0);
  CHECK(constant_arguments > 0);
}

/// backward(): captures iteration 1, replays iteration 2 with new inputs,
/// each against the stock engine on the same inputs.
void check_backward(const model& m, const std::vector<std::string>& expected_functionals,
                    bool expect_sums) {
  const std::vector<torch::Tensor> no_grads(m.params.size());
  auto stock_first = backward_matches_stock(m, m.make_batch(1, 8), &capture_hook, no_grads);
  check_recording(*recording, expected_functionals);
  CHECK(recording->ir.accumulate_grad);
  CHECK(count_kind(*recording, op_kind::accumulate_grad) == m.params.size());
  if (expect_sums)
    CHECK(count_kind(*recording, op_kind::accumulate) > 0);

  auto stock_second = backward_matches_stock(m, m.make_batch(2, 8), &replay_hook, no_grads);
  REQUIRE_FALSE(torch::equal(stock_first[0], stock_second[0]));

  // The program after the pass pipeline still gives the stock engine's gradients.
  functional::run_passes(*recording, "default,gradient_ready_schedule");
  backward_matches_stock(m, m.make_batch(3, 8), &replay_hook, no_grads);
}

/// autograd::grad() with the parameters as inputs: results, not `.grad`.
void check_grad(const model& m) {
  clear_grads(m.params);
  grad_matches_stock(m, m.make_batch(1, 8), &capture_hook);
  CHECK_FALSE(recording->ir.accumulate_grad);
  CHECK(count_kind(*recording, op_kind::accumulate_grad) == 0);
  CHECK(recording->ir.num_outputs == m.params.size());
  for (const auto& p : m.params)
    CHECK_FALSE(p.grad().defined());

  grad_matches_stock(m, m.make_batch(2, 8), &replay_hook);
  functional::run_passes(*recording, "default,gradient_ready_schedule");
  grad_matches_stock(m, m.make_batch(3, 8), &replay_hook);
}

/// backward() into `.grad` that already holds gradients (in-place sums).
void check_existing_grads(const model& m) {
  std::vector<torch::Tensor> initial;
  for (const auto& p : m.params)
    initial.push_back(torch::full_like(p, 0.25));
  backward_matches_stock(m, m.make_batch(1, 8), &capture_hook, initial);
  backward_matches_stock(m, m.make_batch(2, 8), &replay_hook, initial);
}

const std::vector<std::string> mlp_functionals{"AddmmBackward0", "TBackward0", "ReluBackward0",
                                               "TanhBackward0", "MseLossBackward0"};
const std::vector<std::string> branchy_functionals{
    "AddmmBackward0", "CatBackward0", "MulBackward0", "TanhBackward0", "SigmoidBackward0"};

void check_models_on(torch::Device device) {
  for (auto dtype : {torch::kFloat64, torch::kFloat32}) {
    // One section per dtype and case: Catch runs each leaf section once.
    DYNAMIC_SECTION("MLP, backward(), " << dtype) {
      check_backward(make_mlp(dtype, device), mlp_functionals, false);
    }
    DYNAMIC_SECTION("cat and reused tensors, backward(), " << dtype) {
      check_backward(make_branchy(dtype, device), branchy_functionals, true);
    }
    DYNAMIC_SECTION("MLP, autograd::grad(), " << dtype) { check_grad(make_mlp(dtype, device)); }
    DYNAMIC_SECTION("cat and reused tensors, autograd::grad(), " << dtype) {
      check_grad(make_branchy(dtype, device));
    }
    DYNAMIC_SECTION("existing .grad, " << dtype) {
      check_existing_grads(make_branchy(dtype, device));
    }
    DYNAMIC_SECTION("in-place write through a view, " << dtype) {
      check_backward(make_in_place_view(dtype, device), {"AddmmBackward0", "MulBackward0"},
                     true);
      CHECK(count_kind(*recording, op_kind::copy_slices_prologue) == 1);
      CHECK(count_kind(*recording, op_kind::copy_slices_epilogue) == 1);
    }
  }
}

} // namespace

TEST_CASE("functional capture and replay match the stock engine bitwise on the CPU",
          "[engine][functional]") {
  check_models_on(torch::kCPU);
}

TEST_CASE("functional capture and replay match the stock engine bitwise on CUDA",
          "[engine][functional][cuda]") {
  if (!torch::cuda::is_available()) {
    WARN("CUDA not available: skipped");
    SUCCEED();
    return;
  }
  check_models_on(torch::kCUDA);
}

TEST_CASE("autograd::grad() of an intermediate and one parameter runs only what it needs",
          "[engine][functional]") {
  torch::manual_seed(0);
  torch::nn::Linear first(6, 8), second(8, 3);
  auto run = [&](int64_t seed, torch::autograd::Engine::compiled_autograd_fn hook) {
    torch::manual_seed(seed);
    auto h = torch::tanh(first(torch::randn({8, 6})));
    auto loss = second(h).pow(2).sum() + h.sum();
    std::optional<hook_scope> on;
    if (hook)
      on.emplace(hook);
    return torch::autograd::grad({loss}, {h, second->weight});
  };
  require_bitwise_equal(run(1, nullptr), run(1, &capture_hook));
  REQUIRE(recording->ir.exec_filter);
  auto capture_only = std::count_if(
      recording->ir.nodes.begin(), recording->ir.nodes.end(),
      [](const auto& n) { return !n.needed && !n.captures.empty(); });
  CHECK(capture_only == 2);  // tanh's node and second.weight's AccumulateGrad
  for (const auto& o : recording->ir.ops)
    CHECK(o.target != "TanhBackward0");
  require_bitwise_equal(run(2, nullptr), run(2, &replay_hook));
  CHECK_FALSE(first->weight.grad().defined());
}

TEST_CASE("replay refuses a graph that differs, before running anything",
          "[engine][functional]") {
  auto m = make_mlp(torch::kFloat64, torch::kCPU);
  clear_grads(m.params);
  {
    hook_scope on(&capture_hook);
    m.loss(m.make_batch(1, 8)).backward();
  }

  SECTION("another batch size") {
    auto other = m.make_batch(2, 5);
    clear_grads(m.params);
    m.loss(other).backward();
    auto stock = grads_of(m.params);

    clear_grads(m.params);
    auto loss = m.loss(other);
    {
      hook_scope on(&replay_hook);
      REQUIRE_THROWS_WITH(loss.backward(), Catch::Contains("a size changed"));
    }
    for (const auto& p : m.params)
      REQUIRE_FALSE(p.grad().defined());
    loss.backward();  // the graph is intact: the stock engine can run it
    require_bitwise_equal(stock, grads_of(m.params));
  }
  SECTION("existing .grad where the capture had none") {
    auto loss = m.loss(m.make_batch(2, 8));
    for (const auto& p : m.params)
      p.mutable_grad() = torch::zeros_like(p);
    hook_scope on(&replay_hook);
    REQUIRE_THROWS_WITH(loss.backward(), Catch::Contains("differs from the recorded one"));
  }
  SECTION("autograd::grad() with a backward() recording") {
    auto loss = m.loss(m.make_batch(2, 8));
    hook_scope on(&replay_hook);
    REQUIRE_THROWS_WITH(torch::autograd::grad({loss}, m.params),
                        Catch::Contains("do not share a recording"));
  }
}

TEST_CASE("functional capture refuses hooks and create_graph", "[engine][functional]") {
  auto m = make_mlp(torch::kFloat64, torch::kCPU);
  clear_grads(m.params);

  SECTION("a tensor hook") {
    auto loss = m.loss(m.make_batch(1, 8));
    m.params[0].register_hook([](const torch::Tensor& g) { return g * 2; });
    hook_scope on(&capture_hook);
    REQUIRE_THROWS_WITH(loss.backward(), Catch::Contains("has hooks"));
  }
  SECTION("create_graph") {
    auto loss = m.loss(m.make_batch(1, 8));
    hook_scope on(&capture_hook);
    REQUIRE_THROWS_WITH(torch::autograd::grad({loss}, m.params, {}, std::nullopt, true),
                        Catch::Contains("create_graph"));
  }
}

TEST_CASE("the pass pipeline runs on functional-level IR", "[engine][functional][passes]") {
  auto m = make_mlp(torch::kFloat64, torch::kCPU);
  clear_grads(m.params);
  {
    hook_scope on(&capture_hook);
    m.loss(m.make_batch(1, 8)).backward();
  }
  REQUIRE(recording);
  auto ir = recording->ir;
  gradd::compiler::pass_manager passes("default,gradient_ready_schedule");
  passes.run(ir);  // throws, naming the pass, if one broke the graph
  CHECK_FALSE(gradd::compiler::verify(ir));
  CHECK(ir.ops.size() <= recording->ir.ops.size());
  // reorder_accumulate_grad_nodes: each accumulation follows the op that
  // produced its gradient, with only other accumulations in between.
  gradd::compiler::use_def uses(ir);
  size_t accumulations = 0;
  for (size_t i = 0; i < ir.ops.size(); ++i) {
    if (ir.ops[i].kind != op_kind::accumulate_grad)
      continue;
    ++accumulations;
    auto def = gradd::compiler::last_def(uses, ir.ops[i]);
    REQUIRE(def >= 0);
    for (auto k = static_cast<size_t>(def) + 1; k < i; ++k)
      CHECK(ir.ops[k].kind == op_kind::accumulate_grad);
  }
  CHECK(accumulations == m.params.size());
}

namespace {

/// Multiplies by a scale it saves, in user code.
struct scale_by : torch::autograd::Function<scale_by> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& scale) {
    ctx->save_for_backward({scale});
    return x * scale;
  }
  static variable_list backward(torch::autograd::AutogradContext* ctx, variable_list grads) {
    return {grads[0] * ctx->get_saved_variables()[0], torch::Tensor()};
  }
};

/// The functionals reading the value graph_input `position` defines.
std::set<std::string> readers_of(const gradd::compiler::graph& ir, size_t position) {
  gradd::compiler::use_def uses(ir);
  std::set<std::string> readers;
  for (auto user : uses.users[ir.ops[position].results[0]])
    readers.insert(ir.ops[user].target);
  return readers;
}

} // namespace

TEST_CASE("a custom function's functional is user code to the passes",
          "[engine][functional][passes]") {
  torch::manual_seed(0);
  auto w = torch::randn({4, 3}, torch::dtype(torch::kFloat64).requires_grad(true));
  auto x = torch::randn({5, 4}, torch::kFloat64);
  // The output is not 0-dim, so neither is the gradient it starts from.
  auto backward = [&] {
    auto scaled = scale_by::apply(x.mm(w), torch::tensor(3.0, torch::kFloat64));
    (scaled * torch::tensor(0.5, torch::kFloat64)).backward(torch::ones({5, 3}, torch::kFloat64));
  };
  backward();
  auto stock = w.grad().clone();
  w.mutable_grad() = torch::Tensor();
  {
    hook_scope on(&capture_hook);
    backward();
  }
  require_bitwise_equal({stock}, {w.grad()});
  REQUIRE(recording);
  auto ir = recording->ir;
  std::set<std::string> custom, builtin;
  for (const auto& o : ir.ops)
    if (o.kind == op_kind::apply_functional)
      (o.custom_function ? custom : builtin).insert(o.target);
  // libtorch binds a custom function under its type's `typeid` name.
  CHECK(custom == std::set<std::string>{typeid(scale_by).name()});
  CHECK(builtin.count("MulBackward0") == 1);

  // As a CUDA graph's recording would be: activations on the device, the
  // two scales on the CPU. Only the built-in op's scale may move.
  std::vector<size_t> scales;
  for (size_t i = 0; i < ir.ops.size(); ++i) {
    auto& o = ir.ops[i];
    if (o.kind != op_kind::graph_input)
      continue;
    if (o.meta.sizes.empty())
      scales.push_back(i);
    else
      o.meta.device = "cuda:0";
  }
  REQUIRE(scales.size() == 2);
  gradd::compiler::pass_manager passes("move_graph_nodes_to_cuda");
  passes.run(ir);
  CHECK(passes.statistics()
        == std::vector<std::string>{"move_graph_nodes_to_cuda: moved 1 inputs to cuda:0"});
  for (auto i : scales) {
    auto readers = readers_of(ir, i);
    INFO("input " << ir.ops[i].index << " read by " << *readers.begin());
    REQUIRE(readers.size() == 1);
    CHECK(ir.ops[i].meta.device == (readers.count("MulBackward0") ? "cuda:0" : "cpu"));
  }
}
