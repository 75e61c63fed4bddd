// A rank's place in its job, read from torchrun's variables.

#include "actors/job_layout.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <utility>

namespace {

using gradd::actors::job_layout;

job_layout layout_of(const std::map<std::string, std::string>& env) {
  return gradd::actors::read_job_layout([&](const char* name) -> const char* {
    auto found = env.find(name);
    return found == env.end() ? nullptr : found->second.c_str();
  });
}

const std::map<std::string, std::string> torchrun_rank_5{
    {"MASTER_ADDR", "node0"},      {"MASTER_PORT", "29500"},    {"WORLD_SIZE", "8"},
    {"LOCAL_WORLD_SIZE", "4"},     {"RANK", "5"},               {"GROUP_RANK", "1"},
    {"GROUP_WORLD_SIZE", "2"},     {"TORCHELASTIC_RESTART_COUNT", "3"}};

} // namespace

TEST_CASE("a rank reads its machine, its machine's ranks and its job's store from torchrun's "
          "variables",
          "[actors][job_layout]") {
  auto layout = layout_of(torchrun_rank_5);
  CHECK(layout.shared());
  CHECK(layout.store == "node0:29500");
  CHECK(layout.attempt == 3);
  CHECK(layout.world_size == 8);
  CHECK(layout.local_ranks == 4);
  CHECK(layout.machine == 1);
  CHECK(layout.machines == 2);

  SECTION("without GROUP_RANK and GROUP_WORLD_SIZE, they follow from RANK") {
    auto env = torchrun_rank_5;
    env.erase("GROUP_RANK");
    env.erase("GROUP_WORLD_SIZE");
    auto derived = layout_of(env);
    CHECK(derived.machine == 1);
    CHECK(derived.machines == 2);
  }
  SECTION("without LOCAL_WORLD_SIZE, every rank is on one machine") {
    auto env = torchrun_rank_5;
    env.erase("LOCAL_WORLD_SIZE");
    env.erase("GROUP_RANK");
    env.erase("GROUP_WORLD_SIZE");
    auto one = layout_of(env);
    CHECK(one.local_ranks == 8);
    CHECK(one.machine == 0);
    CHECK(one.machines == 1);
  }
}

TEST_CASE("outside a job, or with variables that contradict each other, a rank stands alone",
          "[actors][job_layout]") {
  CHECK(!layout_of({}).shared());
  using variable = std::pair<std::string, std::string>;
  for (auto [name, value] : {variable{"MASTER_PORT", "port"}, variable{"WORLD_SIZE", "-1"},
                             variable{"WORLD_SIZE", "8x"}, variable{"LOCAL_WORLD_SIZE", "9"},
                             variable{"GROUP_RANK", "2"}}) {
    auto env = torchrun_rank_5;
    env[name] = value;
    INFO(name << "=" << value);
    auto alone = layout_of(env);
    CHECK(!alone.shared());
    CHECK(alone.world_size == 1);
  }
}
