// What a binding trial's outputs must be (cuda/expected_outputs.hpp, Note
// [Bound inputs]): plain replays that agree bit for bit ask for the same
// bits; replays that differ by rounding allow each output that differed up
// to rounding_margin times the most it did, with NaN where it was; replays
// that differ otherwise allow no binding at all. On CPU tensors: the rule
// is plain ATen, and a Hopper GPU's kernels were deterministic wherever a
// test could reach them.

#include "cuda/expected_outputs.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

using gradd::cuda::bitwise_equal;
using gradd::cuda::expected_outputs;
using gradd::cuda::rounding_margin;
using torch::Tensor;

namespace {

const auto f64 = torch::dtype(torch::kFloat64);

/// Replays whose first output moves by `step` at element 0 on each call
/// and whose second never moves.
struct drifting_replays {
  double step;
  int calls = 0;

  std::vector<Tensor> operator()() {
    auto drifting = torch::tensor({1.0, 2.0}, f64);
    drifting[0] += step * calls++;
    return {drifting, torch::tensor({3.0, 4.0}, f64)};
  }
};

} // namespace

TEST_CASE("replays that agree bit for bit ask a trial for the same bits", "[graphs]") {
  drifting_replays replays{0.0};
  auto expected = expected_outputs::of(std::ref(replays));
  REQUIRE(expected);
  CHECK(replays.calls == 2);
  CHECK(expected->tolerance == std::vector<double>{0, 0});
  CHECK(expected->matched_by({torch::tensor({1.0, 2.0}, f64), torch::tensor({3.0, 4.0}, f64)}));
  auto one_ulp = std::nextafter(1.0, 2.0);
  CHECK_FALSE(expected->matched_by({torch::tensor({one_ulp, 2.0}, f64), torch::tensor({3.0, 4.0}, f64)}));
  CHECK_FALSE(expected->matched_by({torch::tensor({1.0, 2.0}, f64)}));
  CHECK_FALSE(expected->matched_by({torch::tensor({1.0, 2.0}, f64), Tensor()}));
}

TEST_CASE("replays that differ by rounding allow that rounding, output by output", "[graphs]") {
  drifting_replays replays{1e-6};
  auto expected = expected_outputs::of(std::ref(replays));
  REQUIRE(expected);
  CHECK(replays.calls == 2 + gradd::cuda::spread_replays);
  // The farthest replay was 4 steps from the first.
  CHECK(expected->tolerance[0] == Approx(rounding_margin * 4e-6).epsilon(1e-6));
  CHECK(expected->tolerance[1] == 0);  // never moved: still bit for bit

  auto with = [](double first, double second) {
    return std::vector<Tensor>{torch::tensor({first, 2.0}, f64), torch::tensor({second, 4.0}, f64)};
  };
  CHECK(expected->matched_by(with(1.0 + 1e-5, 3.0)));
  CHECK(expected->matched_by(with(1.0 - 1e-5, 3.0)));
  CHECK_FALSE(expected->matched_by(with(1.0 + 2e-5, 3.0)));   // beyond the rounding
  CHECK_FALSE(expected->matched_by(with(1.0, std::nextafter(3.0, 4.0))));  // the exact one moved
  auto nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_FALSE(expected->matched_by(with(nan, 3.0)));  // a stale read brings NaN
}

TEST_CASE("replays that differ other than by rounding allow no binding", "[graphs]") {
  auto nan = std::numeric_limits<double>::quiet_NaN();
  SECTION("NaN in one replay only") {
    int calls = 0;
    auto replays = [&] {
      return std::vector<Tensor>{torch::tensor({calls++ == 0 ? 1.0 : nan}, f64)};
    };
    CHECK_FALSE(expected_outputs::of(replays));
  }
  SECTION("an integer output") {
    int64_t calls = 0;
    auto replays = [&] { return std::vector<Tensor>{torch::tensor({calls++}, torch::kInt64)}; };
    CHECK_FALSE(expected_outputs::of(replays));
  }
  SECTION("an output defined in one replay only") {
    int calls = 0;
    auto replays = [&] {
      return std::vector<Tensor>{calls++ == 0 ? torch::ones({2}, f64) : Tensor()};
    };
    CHECK_FALSE(expected_outputs::of(replays));
  }
}

TEST_CASE("bitwise_equal compares bytes, NaN and undefined included", "[graphs]") {
  auto nan = std::numeric_limits<double>::quiet_NaN();
  auto a = torch::tensor({nan, 1.0}, f64);
  CHECK(bitwise_equal({a, Tensor()}, {a.clone(), Tensor()}));
  CHECK_FALSE(bitwise_equal({a}, {Tensor()}));
  CHECK_FALSE(bitwise_equal({a}, {a, a}));
  CHECK_FALSE(bitwise_equal({torch::tensor({0.0}, f64)}, {torch::tensor({-0.0}, f64)}));
  CHECK_FALSE(bitwise_equal({a}, {a.to(torch::kFloat32)}));
}
