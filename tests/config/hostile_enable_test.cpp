// Hostile policies through gradd::enable: each is refused before gradd is
// enabled, and the next enable, with a good policy, serves exact backwards
// from a plan.

#include "config/hostile_policies.hpp"
#include "config/policy_files.hpp"
#include "engine/grad_check.hpp"

TEST_CASE("gradd::enable refuses each hostile policy, then enables with a good one",
          "[config]") {
  using gradd::test::grads_of;
  auto good = gradd::test::policy_file("compile:\n  mode: sync\n");
  auto x = torch::randn({4, 3}, torch::requires_grad());
  auto w = torch::randn({3, 2}, torch::requires_grad());
  auto step = [&] {
    gradd::test::clear_grads({x, w});
    torch::tanh(x.mm(w)).sum().backward();
    return grads_of({x, w});
  };
  REQUIRE(!gradd::is_enabled());
  auto stock = step();
  gradd::reset();
  for (const auto& c : gradd::test::hostile_policies()) {
    INFO(c.kind);
    auto path = gradd::test::policy_file(c.text);
    try {
      gradd::enable(path);
      gradd::disable();
      FAIL("enabled");
    } catch (const gradd::config_error& e) {
      CHECK(e.file() == path);
      CHECK(e.line() == c.line);
      CHECK(e.key() == c.key);
    }
    REQUIRE(!gradd::is_enabled());
    auto before = gradd::stats().plan_backwards;
    {
      gradd::enable_guard on{good};
      gradd::test::require_bitwise_equal(stock, step());
    }
    CHECK(gradd::stats().plan_backwards == before + 1);
  }
}
