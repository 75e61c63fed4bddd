// cache.dir: compiled plans kept on disk serve a later process's (or a
// reset process's) first backward of their structure, bitwise; files that
// are not whole plans of this version, and plans of other passes, are not
// used.

#include "actors/digest.hpp"
#include "actors/plan_store.hpp"
#include "child_process.hpp"
#include "engine/grad_check.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

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

/// `m`'s step compiled (sync) from a reset plan table into `dir`: its one file.
fs::path keep_one_plan(model& m, const fs::path& dir) {
  gradd::reset();
  {
    gradd::enable_guard on{with_cache(gradd::compile_mode::sync, dir)};
    m.step();
  }
  auto files = plan_files(dir);
  REQUIRE(files.size() == 1);
  return files[0];
}

/// The stock engine's gradients of `m`'s step under `seed`, then that
/// step's plan kept in `dir`.
std::vector<torch::Tensor> stock_then_kept(model& m, const fs::path& dir, uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<torch::Tensor> stock;
  {
    gradd::disable_guard off;
    stock = m.step();
  }
  torch::manual_seed(seed);
  keep_one_plan(m, dir);
  return stock;
}

} // namespace

TEST_CASE("a plan kept in cache.dir serves the first backward after a reset", "[engine][cache]") {
  auto dir = fresh_folder("reset");
  model m;
  auto stock = stock_then_kept(m, dir, 1);

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
  std::vector<fs::path> files{keep_one_plan(m, dir)};

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

namespace {

std::string read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& file, const std::string& bytes) {
  ::unlink(file.c_str());  // a link or FIFO of the name goes too
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
}

/// `file`'s bytes with its body replaced by `body` and its checksum made
/// to hold again: what a forger who knows the format writes.
std::string resealed(const std::string& file, const std::string& body) {
  auto head = file.substr(0, file.find('\n') + 1);
  auto sum = gradd::actors::sha256(body);
  return head + std::string(gradd::actors::as_bytes(sum)) + body;
}

uint64_t key_of(const fs::path& file) {
  return std::stoull(file.stem().string(), nullptr, 16);
}

} // namespace

TEST_CASE("cache.dir: a plan file is untrusted input, refused on any change and compiled again",
          "[engine][cache]") {
  auto dir = fresh_folder("untrusted");
  model m;
  auto file = keep_one_plan(m, dir);
  auto good = read_bytes(file);
  auto key = key_of(file);
  constexpr size_t max_bytes = 1 << 20;
  auto stored = gradd::actors::load_plan(dir.string(), key, max_bytes);
  REQUIRE(stored.plan);
  auto table = stored.plan->ir;  // the structure's node table, as a capture has it
  auto load = [&] { return gradd::actors::load_plan_for(dir.string(), key, table, max_bytes); };
  REQUIRE(load().plan);

  SECTION("every single-byte change, every truncation and an extension") {
    for (size_t at = 0; at < good.size(); ++at) {
      auto changed = good;
      changed[at] ^= static_cast<char>(1 + at % 255);
      write_bytes(file, changed);
      auto found = load();
      INFO("byte " << at << " of " << good.size());
      CHECK(!found.plan);
      CHECK(!found.refused.empty());
      write_bytes(file, good.substr(0, at));
      CHECK(!load().plan);
    }
    write_bytes(file, good + "x");
    CHECK_THAT(load().refused, Catch::Contains("checksum"));
  }
  SECTION("not a regular file, or over the size bound: refused without reading it") {
    ::unlink(file.c_str());
    REQUIRE(::symlink("/dev/zero", file.c_str()) == 0);
    CHECK(!load().refused.empty());
    ::unlink(file.c_str());
    REQUIRE(::symlink((dir / "elsewhere").c_str(), file.c_str()) == 0);
    write_bytes(dir / "elsewhere", good);  // a link to a good plan: still a link
    CHECK(!load().plan);
    ::unlink(file.c_str());
    REQUIRE(::mkdir(file.c_str(), 0700) == 0);
    CHECK_THAT(load().refused, Catch::Contains("not a regular file"));
    ::rmdir(file.c_str());
    REQUIRE(::mkfifo(file.c_str(), 0600) == 0);  // an open would block without O_NONBLOCK
    CHECK_THAT(load().refused, Catch::Contains("not a regular file"));
    write_bytes(file, resealed(good, good.substr(good.find('\n') + 33) + std::string(max_bytes, '\0')));
    CHECK_THAT(load().refused, Catch::Contains("over daemon.max_message_mb"));
    write_bytes(file, good);
    CHECK(load().plan);  // at the bound's side of it
  }
  SECTION("the engine refuses a changed file, says so, and compiles the structure again") {
    auto changed = good;
    changed[changed.size() / 2] ^= 0x20;
    write_bytes(file, changed);
    gradd::reset();
    gradd::enable_guard on{with_cache(gradd::compile_mode::async, dir)};
    m.step();
    CHECK(gradd::stats().plans_loaded == 0);
    CHECK(gradd::stats().eager_backwards == 1);
    REQUIRE(gradd::wait_for_compiles());
    CHECK(read_bytes(file) != changed);  // compiled again, and written whole
    CHECK(load().plan);
  }
  remove_folder(dir);
}

TEST_CASE("cache.dir: forged plans with a checksum that holds serve bitwise or are refused",
          "[engine][cache]") {
  auto dir = fresh_folder("forged");
  model m;
  auto stock = stock_then_kept(m, dir, 5);
  auto file = plan_files(dir).at(0);
  auto good = read_bytes(file);
  auto body = good.substr(good.find('\n') + 33);
  std::mt19937 random(7);
  int served = 0, refused = 0;
  for (int i = 0; i < 300; ++i) {
    auto forged = body;
    switch (random() % 4) {
      case 0:
        forged[random() % forged.size()] ^= static_cast<char>(1 + random() % 255);
        break;
      case 1:
        forged[random() % forged.size()] = static_cast<char>(random());
        forged[random() % forged.size()] = static_cast<char>(random());
        break;
      case 2:
        forged.resize(random() % forged.size());
        break;
      default: {  // a count or index read as huge
        auto at = random() % (forged.size() - 3);
        std::fill(forged.begin() + at, forged.begin() + at + 4, '\xff');
      }
    }
    write_bytes(file, resealed(good, forged));
    gradd::reset();
    gradd::enable_guard on{with_cache(gradd::compile_mode::async, dir)};
    torch::manual_seed(5);
    auto ours = m.step();
    INFO("forgery " << i);
    gradd::test::require_bitwise_equal(stock, ours);
    (gradd::stats().plans_loaded == 1 ? served : refused) += 1;
    REQUIRE(gradd::wait_for_compiles());
  }
  INFO(served << " served, " << refused << " refused");
  CHECK(refused > 0);
  remove_folder(dir);
}
