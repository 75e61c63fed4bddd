// Comparisons of tensors (cuda/tensor_compare.hpp): on the CPU and, where
// there is a GPU, through gradd's kernels. Bytes: spans in 16-byte words
// and in bytes, in place and through contiguous copies, more pairs than
// one launch carries. Rounding: as ATen measures it.

#include "cuda/tensor_compare.hpp"

#include <catch2/catch.hpp>

#include <limits>

using gradd::cuda::bytes_differ;
using gradd::cuda::rounding_apart;
using gradd::cuda::tensor_pair;
using torch::Tensor;

namespace {

bool differ(const Tensor& a, const Tensor& b) {
  return bytes_differ({{a, b}}).front();
}

void check_comparisons_on(torch::Device device) {
  auto on = torch::device(device);
  SECTION("the last byte of an unaligned span") {
    auto a = torch::arange(1001, on.dtype(torch::kInt64)).to(torch::kUInt8);
    auto b = a.clone();
    CHECK_FALSE(differ(a, b));
    b[1000] = 7;
    CHECK(differ(a, b));
    CHECK(differ(a.narrow(0, 1, 1000), b.narrow(0, 1, 1000)));  // unaligned start
    CHECK_FALSE(differ(a.narrow(0, 1, 999), b.narrow(0, 1, 999)));
  }
  SECTION("the last word of a large aligned span") {
    auto a = torch::randn({1 << 20}, on);
    auto b = a.clone();
    CHECK_FALSE(differ(a, b));
    b[(1 << 20) - 1] = std::nextafter(b[(1 << 20) - 1].item<float>(), 1e9f);
    CHECK(differ(a, b));
  }
  SECTION("NaN bits are bytes like any others") {
    auto nan = torch::full({4}, std::numeric_limits<float>::quiet_NaN(), on);
    CHECK_FALSE(differ(nan, nan.clone()));
    CHECK(differ(nan, -nan));  // the sign bit
  }
  SECTION("sizes and types") {
    auto a = torch::zeros({4}, on);
    CHECK(differ(a, torch::zeros({5}, on)));
    CHECK(differ(a, torch::zeros({4}, on.dtype(torch::kInt32))));
    CHECK_FALSE(differ(torch::zeros({0}, on), torch::zeros({0}, on)));
  }
  SECTION("elements in other layouts are compared in order") {
    auto a = torch::randn({33, 17}, on);
    CHECK_FALSE(differ(a.t(), a.t().contiguous()));
    CHECK(differ(a.t(), a.contiguous().view({17, 33})));
    CHECK_FALSE(differ(a.select(1, 3), a.select(1, 3).clone()));
  }
  SECTION("a non-zero byte, looked for alone") {
    auto zeros = torch::zeros({3, 1000}, on.dtype(torch::kInt64));
    CHECK_FALSE(differ(zeros, Tensor()));
    zeros[2][999] = 1;
    CHECK(differ(zeros, Tensor()));
    CHECK_FALSE(differ(zeros.select(1, 0), Tensor()));  // a strided view: its elements only
  }
  SECTION("more pairs than one launch carries") {
    std::vector<tensor_pair> pairs;
    for (int i = 0; i < 170; ++i) {
      auto a = torch::full({100 + i}, i, on);
      auto b = a.clone();
      if (i == 5 || i == 165)
        b[i] = -1;
      pairs.emplace_back(a, i == 100 ? Tensor() : b);
    }
    auto found = bytes_differ(pairs);
    REQUIRE(found.size() == 170);
    for (int i = 0; i < 170; ++i) {
      INFO("pair " << i);
      CHECK(found[i] == (i == 5 || i == 100 || i == 165));  // 100: full of 100s, not zeros
    }
  }
}

std::optional<double> apart(const Tensor& a, const Tensor& b) {
  return rounding_apart({{a, b}}).front();
}

void check_rounding_on(torch::Device device) {
  auto on = torch::device(device);
  auto inf = std::numeric_limits<double>::infinity();
  auto nan = std::numeric_limits<double>::quiet_NaN();
  SECTION("the largest difference, as ATen measures it on the CPU") {
    for (auto type : {torch::kFloat64, torch::kFloat32, torch::kFloat16, torch::kBFloat16}) {
      INFO("type " << type);
      auto a = torch::randn({3, 1000}, on.dtype(type));
      auto b = a + torch::randn({3, 1000}, on.dtype(type)) * 1e-3;
      auto on_cpu = apart(a.cpu(), b.cpu());
      REQUIRE(on_cpu);
      REQUIRE(apart(a, b));
      CHECK(*apart(a, b) == Approx(*on_cpu).epsilon(1e-2));  // ATen's subtracts in the type
      CHECK(*apart(a.t(), b.t().contiguous()) == *apart(a, b));  // in order, any layout
      CHECK(*apart(a, a.clone()) == 0);
    }
  }
  SECTION("NaN and infinities") {
    auto a = torch::tensor({1.0, inf, -inf, nan}, on.dtype(torch::kFloat64));
    CHECK(*apart(a, a.clone()) == 0);  // equal infinities, NaN where NaN is
    CHECK(*apart(a, torch::tensor({1.0, 5.0, -inf, nan}, on.dtype(torch::kFloat64))) == inf);
    CHECK_FALSE(apart(a, torch::tensor({1.0, inf, -inf, 0.0}, on.dtype(torch::kFloat64))));
  }
  SECTION("tensors it does not measure") {
    auto whole = torch::arange(4, on.dtype(torch::kInt64));
    CHECK_FALSE(apart(whole, whole + 1));
    CHECK_FALSE(apart(torch::zeros({4}, on), torch::zeros({5}, on)));
    auto found = rounding_apart({{torch::ones({2}, on), torch::ones({2}, on) * 3},
                                 {whole, whole}});
    REQUIRE(found.size() == 2);
    CHECK(found[0] == 2.0);
    CHECK_FALSE(found[1]);
  }
}

} // namespace

TEST_CASE("bytes_differ compares tensors byte for byte on the CPU", "[graphs]") {
  check_comparisons_on(torch::kCPU);
}

TEST_CASE("rounding_apart measures floating tensors on the CPU", "[graphs]") {
  check_rounding_on(torch::kCPU);
}

TEST_CASE("rounding_apart measures CUDA tensors with gradd's kernel", "[cuda][graphs]") {
  if (!torch::cuda::is_available()) {
    WARN("CUDA not available: CUDA case skipped");
    return;
  }
  check_rounding_on(torch::kCUDA);
}

TEST_CASE("bytes_differ compares CUDA tensors with gradd's kernel", "[cuda][graphs]") {
  if (!torch::cuda::is_available()) {
    WARN("CUDA not available: CUDA case skipped");
    return;
  }
  check_comparisons_on(torch::kCUDA);
}
