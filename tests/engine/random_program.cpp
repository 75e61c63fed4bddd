// Random backward programs (see random_program.hpp).

#include "engine/random_program.hpp"

#include <random>
#include <sstream>
#include <stdexcept>

namespace gradd::test {

namespace {

using torch::Tensor;

/// Applies one op.
Tensor apply(const instruction& in, const std::vector<Tensor>& v, const program_inputs& inputs,
             int64_t n) {
  const auto& a = v[in.a];
  const auto& b = v[in.b];
  switch (in.code) {
    case op_code::tanh: return a.tanh();
    case op_code::sigmoid: return a.sigmoid();
    case op_code::relu: return a.relu();
    case op_code::scale: return a * in.scalar;
    case op_code::add: return a + b;
    case op_code::sub: return a - b;
    case op_code::mul: return a * b.tanh();
    case op_code::divide: return a / (1 + b * b);
    case op_code::mm: return a.mm(b.tanh()) / static_cast<double>(n);
    case op_code::transpose: return a.t();
    case op_code::broadcast_sum: return a.sum(0, true) * b / static_cast<double>(n);
    case op_code::cat_narrow: return torch::cat({a, b}, 0).narrow(0, in.offset, n);
    case op_code::copy_slices: {
      auto c = a.clone();
      c.narrow(1, in.offset, 2).mul_(b.narrow(1, in.offset, 2).tanh());
      return c;
    }
    case op_code::index_select: return a.index_select(0, inputs.permutation);
    case op_code::where: return torch::where(inputs.mask, a, b);
    case op_code::flip_reshape: return a.reshape({n * n}).flip(0).reshape({n, n});
    case op_code::softmax: return torch::softmax(a, 1);
    case op_code::layer_norm: return torch::layer_norm(a, {n});
    case op_code::split_cat: {
      auto blocks = a.split(2, 1);  // n = 5: widths 2, 2 and 1
      return torch::cat({blocks[2], blocks[0], blocks[0]}, 1);
    }
    case op_code::detach_mul: return a.detach() * b;
    case op_code::max_mul: return std::get<0>(a.max(1, true)) * b;
    case op_code::addmm: return torch::addmm(b, a, b.tanh(), 1.0, 1.0 / static_cast<double>(n));
    case op_code::expand_sum: return a.unsqueeze(0).expand({3, n, n}).sum(0) / 3.0;
    case op_code::mixed_dtype: return a * b.to(torch::kBFloat16);
    case op_code::in_place: {
      auto c = a * 1.5;
      c.mul_(b.sigmoid());
      return c;
    }
    case op_code::unbind_stack: {
      auto rows = a.unbind(0);
      rows[0] = rows[1];
      return torch::stack(rows);
    }
    case op_code::sort_mul: return std::get<0>(a.sort(1)) * b;
    case op_code::cumsum: return a.cumsum(1) / static_cast<double>(n);
  }
  throw std::logic_error("unknown op");
}

} // namespace

const char* name_of(op_code code) {
  static const char* names[op_count] = {
      "tanh", "sigmoid", "relu", "scale", "add", "sub", "mul", "divide", "mm",
      "transpose", "broadcast_sum", "cat_narrow", "copy_slices", "index_select", "where",
      "flip_reshape", "softmax", "layer_norm", "split_cat", "detach_mul", "max_mul", "addmm",
      "expand_sum", "mixed_dtype", "in_place", "unbind_stack", "sort_mul", "cumsum"};
  return names[static_cast<int>(code)];
}

const char* name_of(backward_form form) {
  static const char* names[form_count] = {"weighted_sum", "several_roots", "grad_of_some",
                                          "backward_with_inputs", "retained_twice",
                                          "retained_then_grad"};
  return names[static_cast<int>(form)];
}

bool retains(backward_form form) {
  return form == backward_form::retained_twice || form == backward_form::retained_then_grad;
}

std::string program::describe() const {
  std::ostringstream out;
  for (size_t i = 0; i < ops.size(); ++i)
    out << "%" << leaves + i << " = " << name_of(ops[i].code) << "(%" << ops[i].a << ", %"
        << ops[i].b << "); ";
  out << "outputs";
  for (auto o : outputs)
    out << " %" << o;
  out << ", " << name_of(form) << ", wrt";
  for (auto w : wrt)
    out << " %" << w;
  return out.str();
}

program make_program(uint32_t seed) {
  std::mt19937 random(seed);
  auto below = [&](size_t bound) {
    return std::uniform_int_distribution<size_t>(0, bound - 1)(random);
  };
  program p;
  p.leaves = 2 + below(3);
  size_t values = p.leaves;
  size_t op_total = 6 + below(14);
  for (size_t i = 0; i < op_total; ++i) {
    instruction in;
    in.code = static_cast<op_code>(below(op_count));
    // Half the time the newest value, so chains grow deep; otherwise any.
    in.a = below(2) == 0 ? values - 1 : below(values);
    in.b = below(values);
    in.scalar = std::uniform_real_distribution<double>(-1.5, 1.5)(random);
    in.offset = static_cast<int64_t>(below(static_cast<size_t>(p.n) - 1));
    p.ops.push_back(in);
    ++values;
  }
  p.outputs.push_back(values - 1);
  for (size_t extra = below(3); extra > 0; --extra)
    p.outputs.push_back(p.leaves + below(values - p.leaves));
  for (size_t i = 0; i < p.outputs.size(); ++i)
    p.weights.push_back(std::uniform_real_distribution<double>(0.5, 2.0)(random));
  p.form = static_cast<backward_form>(below(form_count));
  if (p.form == backward_form::grad_of_some || p.form == backward_form::retained_then_grad) {
    p.wrt = {below(p.leaves), p.leaves + below(values - p.leaves)};  // a leaf, an intermediate
  } else if (p.form == backward_form::backward_with_inputs) {
    for (size_t leaf = 0; leaf < p.leaves; ++leaf)
      if (below(2) == 0 || leaf + 1 == p.leaves)
        p.wrt.push_back(leaf);
  }
  return p;
}

program_inputs::program_inputs(const program& p, uint32_t seed, torch::TensorOptions options) {
  torch::manual_seed(seed);
  for (size_t i = 0; i < p.leaves; ++i) {
    // Leaf 0 is a transposed (non-contiguous) tensor: its gradient keeps
    // its strides. Leaves 1 and up alternate: with a `.grad` or without.
    auto value = torch::randn({p.n, p.n}, options) * 0.7;
    if (i == 0)
      value = value.t();
    auto leaf = value.detach().requires_grad_();
    if (i % 2 == 1)
      leaf.mutable_grad() = torch::randn({p.n, p.n}, options) * 0.1;
    leaves.push_back(leaf);
  }
  permutation = torch::randperm(p.n, options.dtype(torch::kLong));
  mask = torch::rand({p.n, p.n}, options) > 0.5;
}

std::vector<Tensor> run(const program& p, const program_inputs& inputs) {
  std::vector<Tensor> v = inputs.leaves;
  for (const auto& in : p.ops)
    v.push_back(apply(in, v, inputs, p.n));
  std::vector<Tensor> roots;
  for (size_t i = 0; i < p.outputs.size(); ++i)
    roots.push_back(v[p.outputs[i]].sum() * p.weights[i]);
  auto loss = roots[0];
  for (size_t i = 1; i < roots.size(); ++i)
    loss = loss + roots[i];
  std::vector<Tensor> wrt;
  for (auto w : p.wrt)
    wrt.push_back(v[w]);
  switch (p.form) {
    case backward_form::weighted_sum: loss.backward(); return {};
    case backward_form::several_roots: torch::autograd::backward(roots); return {};
    case backward_form::grad_of_some:
      return torch::autograd::grad({loss}, wrt, {}, std::nullopt, false, /*allow_unused=*/true);
    case backward_form::backward_with_inputs:
      torch::autograd::backward({loss}, {}, std::nullopt, false, wrt);
      return {};
    case backward_form::retained_twice:
      loss.backward({}, /*retain_graph=*/true);
      loss.backward();
      return {};
    case backward_form::retained_then_grad:
      loss.backward({}, /*retain_graph=*/true);
      return torch::autograd::grad({loss}, wrt, {}, std::nullopt, false, /*allow_unused=*/true);
  }
  return {};
}

} // namespace gradd::test
