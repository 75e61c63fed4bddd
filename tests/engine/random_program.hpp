#pragma once

// Random backward programs for differential tests against the stock engine
// (tests/engine/random_graphs_test.cpp): a seed makes leaves, a list of ops
// over any earlier value and the form of the backward; the constants they
// read are drawn from a data seed, so a replay can see new data in the same
// structure.

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gradd::test {

/// The ops a program draws from. Each keeps values bounded (products go
/// through tanh, quotients through 1 + x²) so that long chains stay finite.
enum class op_code {
  tanh,
  sigmoid,
  relu,
  scale,            ///< a * scalar
  add,
  sub,
  mul,              ///< a * tanh(b)
  divide,           ///< a / (1 + b²)
  mm,               ///< a @ tanh(b) / n
  transpose,        ///< a view
  broadcast_sum,    ///< a.sum(0, keepdim) * b / n: a reduction and a broadcast
  cat_narrow,       ///< cat({a, b}).narrow(...)
  copy_slices,      ///< a.clone() with a slice multiplied in place (CopySlices)
  index_select,     ///< rows of a in a fixed permuted order
  where,            ///< where(mask, a, b)
  flip_reshape,     ///< views and a flip
  softmax,
  layer_norm,
  split_cat,        ///< a's column blocks, one used twice, one not (an undefined gradient)
  detach_mul,       ///< a.detach() * b: the graph cut
  max_mul,          ///< a's row maxima times b (a scatter in the backward)
  addmm,            ///< b + a @ tanh(b) / n
  expand_sum,       ///< a expanded to three copies and summed back
  mixed_dtype,      ///< a * b in bfloat16: the output check casts b's gradient
  in_place,         ///< (a * 1.5) multiplied by sigmoid(b) in place
  unbind_stack,     ///< a's rows stacked again, row 1 twice and row 0 not
  sort_mul,         ///< a's rows sorted (saved int64 indices) times b
  cumsum,           ///< a's running sums along rows / n
};
constexpr int op_count = static_cast<int>(op_code::cumsum) + 1;

/// The op's name, for failure messages.
const char* name_of(op_code code);

/// One op of a program.
struct instruction {
  op_code code;
  size_t a = 0, b = 0;  ///< operands: indices into the values so far
  double scalar = 0;
  int64_t offset = 0;   ///< where a slice starts
};

/// How a program's backward runs.
enum class backward_form {
  weighted_sum,          ///< backward() of the outputs' weighted sum
  several_roots,         ///< autograd::backward of each output's sum
  grad_of_some,          ///< autograd::grad of a leaf and an intermediate
  backward_with_inputs,  ///< backward() with some leaves as inputs
  retained_twice,  ///< backward(retain_graph) and then backward() again
  retained_then_grad,  ///< backward(retain_graph), then autograd::grad as grad_of_some
};
constexpr int form_count = static_cast<int>(backward_form::retained_then_grad) + 1;

/// The form's name, for failure messages.
const char* name_of(backward_form form);

/// Whether a program of `form` makes two backwards.
bool retains(backward_form form);

/// A random program over `leaves` values of shape n × n.
struct program {
  int64_t n = 5;
  size_t leaves = 0;
  std::vector<instruction> ops;
  std::vector<size_t> outputs;  ///< values the loss reads
  std::vector<double> weights;  ///< per output
  backward_form form = backward_form::weighted_sum;
  std::vector<size_t> wrt;      ///< the values autograd::grad or `inputs` name, by form

  /// The program as text, for failure messages.
  std::string describe() const;
};

/// The program of `seed`.
program make_program(uint32_t seed);

/// What a program runs on: its leaves and, per data seed, its constants.
struct program_inputs {
  std::vector<torch::Tensor> leaves;
  torch::Tensor permutation;  ///< index_select's rows
  torch::Tensor mask;         ///< where's condition

  /// Draws them for `p` from `seed`.
  program_inputs(const program& p, uint32_t seed, torch::TensorOptions options);
};

/// Runs the program's forward and its backward; returns what
/// autograd::grad returns (nothing for the other forms).
std::vector<torch::Tensor> run(const program& p, const program_inputs& inputs);

} // namespace gradd::test
