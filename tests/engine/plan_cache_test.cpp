// cache.dir: compiled plans kept on disk serve a later process's (or a
// reset process's) first backward of their structure, bitwise; files that
// are not whole plans of this version, and plans of other passes, are not
// used.

#include "child_process.hpp"
#include "engine/grad_check.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace {

namespace fs = std::filesystem;

/// Removes `dir` and what is in it. Not fs::remove_all: libtorch.so exports
/// an older std::filesystem that calls bind to, and its remove_all crashed.
void remove_folder(const fs::path& dir) {
  REQUIRE(std::system(("rm -rf '" + dir.string() + "'").c_str()) == 0);
}

/// A fresh, empty folder for one case.
fs::path fresh_folder(const std::string& name) {
  auto dir = fs::path("/tmp") / ("gradd-plan-cache-" + name + "-" + std::to_string(::getpid()));
  remove_folder(dir);
  return dir;
}

gradd::settings with_cache(gradd::compile_mode mode, const fs::path& dir) {
  gradd::settings s;
  s.compile.mode = mode;
  s.cache.dir = dir.string();
  return s;
}

std::vector<fs::path> plan_files(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".plan")
      files.push_back(entry.path());
  return files;
}

/// The structure every case uses: a small MLP's backward.
struct model {
  model() {
    torch::manual_seed(11);
    w1 = torch::randn({8, 16}, torch::kFloat64).requires_grad_();
    w2 = torch::randn({16, 4}, torch::kFloat64).requires_grad_();
  }
  std::vector<torch::Tensor> step() {
    gradd::test::clear_grads({w1, w2});
    auto x = torch::randn({5, 8}, torch::kFloat64);
    torch::tanh(x.mm(w1)).mm(w2).square().sum().backward();
    return gradd::test::grads_of({w1, w2});
  }
  torch::Tensor w1, w2;
};

} // namespace

TEST_CASE("a plan kept in cache.dir serves the first backward after a reset", "[engine][cache]") {
  auto dir = fresh_folder("reset");
  model m;
  torch::manual_seed(1);
  std::vector<torch::Tensor> stock;
  {
    gradd::disable_guard off;
    stock = m.step();
  }
  gradd::reset();
  {
    gradd::enable_guard on{with_cache(gradd::compile_mode::sync, dir)};
    torch::manual_seed(1);
    m.step();
  }
  REQUIRE(plan_files(dir).size() == 1);

  gradd::reset();  // the plan table is empty again; the file is not
  gradd::enable_guard on{with_cache(gradd::compile_mode::async, dir)};
  torch::manual_seed(1);
  auto ours = m.step();  // async: without the file, the stock engine would serve it
  auto s = gradd::stats();
  CHECK(s.plans_loaded == 1);
  CHECK(s.plan_backwards == 1);
  CHECK(s.eager_backwards == 0);
  CHECK(s.compiles == 0);
  gradd::test::require_bitwise_equal(stock, ours);
  remove_folder(dir);
}

TEST_CASE("cache.dir: foreign bytes and other passes are not used", "[engine][cache]") {
  auto dir = fresh_folder("refused");
  model m;
  gradd::reset();
  {
    gradd::enable_guard on{with_cache(gradd::compile_mode::sync, dir)};
    m.step();
  }
  auto files = plan_files(dir);
  REQUIRE(files.size() == 1);

  SECTION("a file that is not a whole plan of this version") {
    for (const std::string junk : {std::string("not a plan at all"),
                                   std::string("gradd-plan 1 gradd 0.0.0 torch 1.0\n\x01\x02"),
                                   std::string(4096, '\xff')}) {
      std::ofstream(files[0], std::ios::binary | std::ios::trunc) << junk;
      gradd::reset();
      gradd::enable_guard on{with_cache(gradd::compile_mode::async, dir)};
      m.step();
      auto s = gradd::stats();
      CHECK(s.plans_loaded == 0);
      CHECK(s.eager_backwards == 1);  // compiled again instead
      REQUIRE(gradd::wait_for_compiles());
    }
    gradd::reset();
    gradd::enable_guard on{with_cache(gradd::compile_mode::async, dir)};
    m.step();
    CHECK(gradd::stats().plans_loaded == 1);  // the compile wrote a whole file again
  }
  SECTION("another pass pipeline files its plans under another key") {
    gradd::reset();
    auto other = with_cache(gradd::compile_mode::async, dir);
    other.passes.pipeline = "dce";
    gradd::enable_guard on{other};
    m.step();
    CHECK(gradd::stats().plans_loaded == 0);
    REQUIRE(gradd::wait_for_compiles());
    CHECK(plan_files(dir).size() == 2);
  }
  remove_folder(dir);
}

TEST_CASE("a plan kept by another process serves this one's first backward", "[engine][cache]") {
  auto dir = fresh_folder("process");
  fs::create_directories(dir);
  auto child = gradd::test::run_child({GRADD_LIFECYCLE_CHILD, "keep_plan"},
                                      std::chrono::seconds(20),
                                      {"GRADD_TEST_CACHE_DIR=" + dir.string()});
  INFO(child.out << child.err);
  REQUIRE(child.exited(0));
  REQUIRE(plan_files(dir).size() == 1);

  gradd::reset();
  gradd::enable_guard on{with_cache(gradd::compile_mode::async, dir)};
  auto x = torch::ones({3}, torch::requires_grad());  // the child's structure
  (x * 2).sum().backward();
  auto s = gradd::stats();
  CHECK(s.plans_loaded == 1);
  CHECK(s.plan_backwards == 1);
  CHECK(torch::equal(x.grad(), torch::full({3}, 2.0)));
  remove_folder(dir);
}
