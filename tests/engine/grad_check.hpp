#pragma once

// Helpers that run one backward on the stock engine and under gradd and
// compare what they produced, bitwise.

#include "engine/gradd.hpp"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

namespace gradd::test {

/// A policy whose compiles are synchronous: every backward, the first one
/// of a structure included, is served by a plan, so tests can count them.
inline settings sync_settings() {
  settings s;
  s.compile.mode = compile_mode::sync;
  return s;
}

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

/// Returns clones of the tensors' `.grad` (undefined stays undefined).
inline std::vector<torch::Tensor> grads_of(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> grads;
  for (const auto& t : tensors)
    grads.push_back(t.grad().defined() ? t.grad().clone(at::MemoryFormat::Preserve)
                                       : torch::Tensor());
  return grads;
}

/// Checks that two lists of tensors are equal element by element, bitwise,
/// with undefined matching undefined only.
inline void require_bitwise_equal(const std::vector<torch::Tensor>& expected,
                                  const std::vector<torch::Tensor>& actual) {
  REQUIRE(expected.size() == actual.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("tensor " << i);
    REQUIRE(expected[i].defined() == actual[i].defined());
    if (!expected[i].defined())
      continue;
    REQUIRE(expected[i].sizes() == actual[i].sizes());
    REQUIRE(expected[i].strides() == actual[i].strides());
    REQUIRE(expected[i].dtype() == actual[i].dtype());
    REQUIRE(torch::equal(expected[i].cpu(), actual[i].cpu()));
  }
}

/// Runs `step` (which computes and back-propagates a fresh forward pass)
/// on the stock engine, then `runs` times under gradd, starting each run
/// from the same `.grad` state; requires bitwise-equal `.grad` of `leaves`
/// and equal return values. Returns the statistics of the gradd runs.
inline statistics check_against_stock(
    const std::vector<torch::Tensor>& leaves,
    const std::function<std::vector<torch::Tensor>()>& step, int runs = 2) {
  auto initial = grads_of(leaves);
  auto restore = [&] {
    for (size_t i = 0; i < leaves.size(); ++i) {
      auto leaf = leaves[i];
      leaf.mutable_grad() = initial[i].defined() ? initial[i].clone(at::MemoryFormat::Preserve)
                                                 : torch::Tensor();
    }
  };
  std::vector<torch::Tensor> stock_result;
  {
    disable_guard off;
    stock_result = step();
  }
  auto stock_grads = grads_of(leaves);
  reset();
  for (int r = 0; r < runs; ++r) {
    INFO("gradd run " << r);
    restore();
    std::vector<torch::Tensor> result;
    {
      enable_guard on{sync_settings()};
      result = step();
    }
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
