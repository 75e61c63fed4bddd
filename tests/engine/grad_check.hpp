#pragma once

// Helpers that run one backward on the stock engine and under gradd and
// compare what they produced, bitwise.

#include "execute/plan_trace.hpp"
#include "gradd/gradd.hpp"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

namespace gradd::test {

/// A policy whose compiles are synchronous: every backward, the first one
/// of a structure included, is served by a plan, so tests can count them.
/// No CUDA graphs: plans serve CUDA backwards too.
inline settings sync_settings() {
  settings s;
  s.compile.mode = compile_mode::sync;
  s.cuda_graphs.enabled = false;
  return s;
}

/// sync_settings with CUDA graphs for every shape: on CUDA, a structure's
/// first backward is recorded for a capture, later ones replay its graph.
inline settings graph_settings() {
  auto s = sync_settings();
  s.cuda_graphs.enabled = true;
  s.cuda_graphs.mode = graph_shape_policy::static_shapes;
  return s;
}

/// Whether check_against_stock runs gradd with graph_settings (and waits
/// for each capture) instead of sync_settings: a flag for one scope.
inline bool& graphs_under_test() {
  static bool on = false;
  return on;
}

class graphs_under_test_scope {
public:
  graphs_under_test_scope() { graphs_under_test() = true; }
  ~graphs_under_test_scope() { graphs_under_test() = false; }
  graphs_under_test_scope(const graphs_under_test_scope&) = delete;
  graphs_under_test_scope& operator=(const graphs_under_test_scope&) = delete;
};

/// A synchronous policy that serves every backward with the stock engine.
inline settings force_eager_settings() {
  auto s = sync_settings();
  s.fallback.force_eager = true;
  return s;
}

/// Sets every tensor's `.grad` to undefined.
inline void clear_grads(const std::vector<torch::Tensor>& tensors) {
  for (auto t : tensors)
    t.mutable_grad() = torch::Tensor();
}

/// A copy of `t` as it lies in memory: its whole storage copied, viewed
/// with the same sizes, strides and storage offset (a clone would make it
/// dense and move it to offset 0).
inline torch::Tensor exact_copy(const torch::Tensor& t) {
  auto bytes = static_cast<int64_t>(t.storage().nbytes());
  auto as_bytes = t.options().dtype(torch::kUInt8);
  auto source = torch::empty({0}, as_bytes).set_(t.storage(), 0, {bytes}, {1});
  auto copy = torch::empty({bytes}, as_bytes).copy_(source);
  return torch::empty({0}, t.options()).set_(copy.storage(), t.storage_offset(), t.sizes(),
                                             t.strides());
}

/// Exact copies of the tensors' `.grad` (undefined stays undefined).
inline std::vector<torch::Tensor> grads_of(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> grads;
  for (const auto& t : tensors)
    grads.push_back(t.grad().defined() ? exact_copy(t.grad()) : torch::Tensor());
  return grads;
}

/// Sets each tensor's `.grad` to an exact copy of `grads[i]` (none where
/// it is undefined): every engine under comparison starts from the same
/// `.grad`, laid out the same (an accumulation in place keeps the layout
/// of the `.grad` it adds into, a view's storage offset included).
inline void set_grads(const std::vector<torch::Tensor>& tensors,
                      const std::vector<torch::Tensor>& grads) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    auto t = tensors[i];
    t.mutable_grad() = grads[i].defined() ? exact_copy(grads[i]) : torch::Tensor();
  }
}

/// The elements of `t` as integers of their width, on the CPU: equal bits
/// compare equal (a NaN equals itself), different bits do not (-0.0 is not
/// 0.0).
inline torch::Tensor bits_of(const torch::Tensor& t) {
  auto cpu = t.cpu();
  if (cpu.is_complex())
    cpu = torch::view_as_real(cpu);
  switch (cpu.element_size()) {
    case 1: return cpu.view(torch::kUInt8);
    case 2: return cpu.view(torch::kInt16);
    case 4: return cpu.view(torch::kInt32);
    default: return cpu.view(torch::kInt64);
  }
}

/// Whether two tensors are the same bits in the same layout (as
/// require_bitwise_equal checks, without asserting: for threads, where
/// Catch cannot).
inline bool bitwise_equal(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.defined() != b.defined())
    return false;
  return !a.defined()
         || (a.dtype() == b.dtype() && a.device() == b.device() && a.layout() == b.layout()
             && a.sizes() == b.sizes() && a.strides() == b.strides()
             && a.storage_offset() == b.storage_offset() && torch::equal(bits_of(a), bits_of(b)));
}

/// bitwise_equal, element by element of two lists.
inline bool bitwise_equal(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!bitwise_equal(a[i], b[i]))
      return false;
  return true;
}

/// Checks that two tensors are the same bits in the same layout: dtype,
/// device, sizes, strides, storage offset and every element's bits; an
/// undefined tensor matches an undefined one only.
inline void require_bitwise_equal(const torch::Tensor& expected, const torch::Tensor& actual) {
  REQUIRE(expected.defined() == actual.defined());
  if (!expected.defined())
    return;
  REQUIRE(expected.dtype() == actual.dtype());
  REQUIRE(expected.device() == actual.device());
  REQUIRE(expected.layout() == actual.layout());
  REQUIRE(expected.sizes() == actual.sizes());
  REQUIRE(expected.strides() == actual.strides());
  REQUIRE(expected.storage_offset() == actual.storage_offset());
  auto expected_bits = bits_of(expected), actual_bits = bits_of(actual);
  bool same_bits = torch::equal(expected_bits, actual_bits);
  if (!same_bits && expected.is_floating_point()) {
    auto diff = (expected.cpu().to(torch::kDouble) - actual.cpu().to(torch::kDouble)).abs();
    UNSCOPED_INFO((expected_bits != actual_bits).sum().item<int64_t>()
                  << " of " << expected.numel() << " elements differ, by up to "
                  << diff.max().item<double>() << " (largest |value| "
                  << expected.abs().max().item<double>() << ")");
  }
  REQUIRE(same_bits);
}

/// require_bitwise_equal, element by element of two lists.
inline void require_bitwise_equal(const std::vector<torch::Tensor>& expected,
                                  const std::vector<torch::Tensor>& actual) {
  REQUIRE(expected.size() == actual.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("tensor " << i);
    require_bitwise_equal(expected[i], actual[i]);
  }
}

/// Who a case expects to serve its backwards under gradd.
enum class served_by { plan, stock_engine };

/// Runs `step` (which computes and back-propagates a fresh forward pass)
/// on the stock engine, then `runs` times under gradd, starting each run
/// from the same `.grad` state; requires bitwise-equal `.grad` of `leaves`
/// and equal return values, and that plans ran (or, for `stock_engine`,
/// none did) as the plan trace shows, agreeing with the statistics: plan
/// runs are the plan-served backwards that no CUDA graph served. gradd runs
/// with `policy` if given, else with sync_settings, or under
/// graphs_under_test() with graph_settings, each run waiting for the
/// capture it asked for. Returns the statistics of the gradd runs.
inline statistics check_against_stock(
    const std::vector<torch::Tensor>& leaves,
    const std::function<std::vector<torch::Tensor>()>& step, int runs = 2,
    served_by expected = served_by::plan, const settings* policy = nullptr) {
  // Every engine starts from copies of the `.grad` found (set_grads): the
  // stock engine on the originals and gradd on dense clones could differ
  // in layout alone.
  auto initial = grads_of(leaves);
  std::vector<torch::Tensor> stock_result;
  {
    set_grads(leaves, initial);
    disable_guard off;
    stock_result = step();
  }
  auto stock_grads = grads_of(leaves);
  reset();
  for (int r = 0; r < runs; ++r) {
    INFO("gradd run " << r);
    set_grads(leaves, initial);
    std::vector<torch::Tensor> result;
    auto trace_before = gradd::execute::plan_trace_of_this_thread();
    auto before = stats();
    {
      enable_guard on{policy               ? *policy
                      : graphs_under_test() ? graph_settings()
                                            : sync_settings()};
      result = step();
    }
    REQUIRE(wait_for_compiles());
    auto after = stats();
    auto by_graphs = after.graph_backwards - before.graph_backwards;
    // Who served it, as the trace shows, not only as the statistics say.
    const auto& trace = gradd::execute::plan_trace_of_this_thread();
    if (expected == served_by::plan && by_graphs == 0) {
      REQUIRE(trace.runs > trace_before.runs);
      REQUIRE(trace.node_calls > trace_before.node_calls);
    } else if (expected == served_by::stock_engine) {
      REQUIRE(trace.runs == trace_before.runs);
    }
    REQUIRE(trace.runs - trace_before.runs
            == after.plan_backwards - before.plan_backwards - by_graphs);
    require_bitwise_equal(stock_grads, grads_of(leaves));
    require_bitwise_equal(stock_result, result);
  }
  return stats();
}

/// The devices the suite runs a case on; CUDA only where available.
inline std::vector<torch::Device> test_devices() {
  std::vector<torch::Device> devices{torch::kCPU};
  if (torch::cuda::is_available())
    devices.emplace_back(torch::kCUDA);
  return devices;
}

} // namespace gradd::test
