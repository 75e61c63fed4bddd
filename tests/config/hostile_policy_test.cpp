// Hostile policies: bad syntax, types, ranges, structure, encodings, YAML
// features and file kinds. Each is a config_error naming file, line and key;
// nothing else escapes load_settings, and nothing blocks.

#include "config/hostile_policies.hpp"
#include "config/policy_file.hpp"
#include "config/policy_files.hpp"
#include "gradd/policy.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>
#include <iterator>
#include <random>

using gradd::test::policy_file;
using gradd::test::scratch_folder;

namespace {

/// What load_settings raised for `path`: the config_error, or a failure.
struct outcome {
  bool config_error = false;
  std::string file, key, what;
  int line = -1;
};

outcome load(const std::string& path) {
  outcome o;
  try {
    gradd::load_settings(path);
    o.what = "no error";
  } catch (const gradd::config_error& e) {
    o = {true, e.file(), e.key(), e.what(), e.line()};
  } catch (const std::exception& e) {
    o.what = std::string("another exception: ") + e.what();
  }
  return o;
}

/// Checks a file-level refusal: line 0, no key, the path named.
void check_refused(const std::string& path, const std::string& says) {
  INFO("policy path: " << path);
  auto o = load(path);
  INFO(o.what);
  REQUIRE(o.config_error);
  CHECK(o.file == path);
  CHECK(o.line == 0);
  CHECK(o.key.empty());
  CHECK_THAT(o.what, Catch::Contains(says));
}

} // namespace

TEST_CASE("a table of hostile policies: each a config_error naming file, line and key",
          "[config]") {
  const auto& table = gradd::test::hostile_policies();
  REQUIRE(table.size() >= 40);
  for (const auto& c : table) {
    INFO(c.kind);
    auto path = policy_file(c.text);
    auto started = std::chrono::steady_clock::now();
    auto o = load(path);
    INFO(o.what);
    REQUIRE(o.config_error);
    CHECK(o.file == path);
    CHECK(o.line == c.line);
    CHECK(o.key == c.key);
    CHECK_THAT(o.what, Catch::Contains(c.says));
    CHECK_THAT(o.what, Catch::StartsWith("gradd: " + path + ":" + std::to_string(c.line) + ": "));
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
  }
}

TEST_CASE("policies refused for the file, not its text", "[config]") {
  auto folder = scratch_folder();
  SECTION("an empty path") {
    auto o = load("");
    REQUIRE(o.config_error);
    CHECK(o.file.empty());
    CHECK(o.what == "gradd: the policy path is empty");
  }
  SECTION("a missing file") {
    check_refused((folder / "missing.yaml").string(), "cannot open the file: No such file");
  }
  SECTION("a directory") {
    check_refused(folder.string(), "is a directory, not a regular file");
  }
  SECTION("a symbolic link to a directory") {
    std::filesystem::create_directory_symlink(folder, folder / "link");
    check_refused((folder / "link").string(), "is a directory, not a regular file");
  }
  SECTION("a symbolic link to nothing") {
    std::filesystem::create_symlink(folder / "gone.yaml", folder / "dangling.yaml");
    check_refused((folder / "dangling.yaml").string(), "a symbolic link to nothing");
  }
  SECTION("a symbolic link loop") {
    std::filesystem::create_symlink(folder / "b.yaml", folder / "a.yaml");
    std::filesystem::create_symlink(folder / "a.yaml", folder / "b.yaml");
    check_refused((folder / "a.yaml").string(), "Too many levels of symbolic links");
  }
  SECTION("a path through a regular file") {
    auto file = policy_file("cache: {max_plans: 2}\n");
    check_refused(file + "/policy.yaml", "Not a directory");
  }
  SECTION("a path too long for the system") {
    std::string path = "/tmp";
    for (int i = 0; i < 2000; ++i)
      path += "/abc";
    check_refused(path, "File name too long");
  }
  SECTION("a character device") {
    check_refused("/dev/null", "is a character device, not a regular file");
  }
  SECTION("a FIFO, refused without blocking") {
    auto fifo = (folder / "policy.fifo").string();
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    auto loading = std::async(std::launch::async, [&] { return load(fifo); });
    if (loading.wait_for(std::chrono::seconds(10)) == std::future_status::timeout) {
      // Blocked in open(): a writer releases it, so the test ends either way.
      int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      ::close(writer);
      FAIL("load_settings blocked on a FIFO");
    }
    auto o = loading.get();
    REQUIRE(o.config_error);
    CHECK(o.line == 0);
    CHECK_THAT(o.what, Catch::Contains("is a FIFO (named pipe), not a regular file"));
  }
  SECTION("a file over 1 MiB") {
    auto path = policy_file(std::string(gradd::config::max_policy_bytes, '#') + "\n");
    check_refused(path, "holds more than 1048576 bytes (1 MiB)");
  }
  SECTION("/proc/self/mem: regular, but reading fails") {
    check_refused("/proc/self/mem", "cannot read the file: Input/output error");
  }
  SECTION("a file this process may not read") {
    // Root reads a chmod-000 file; /proc/sys/vm/drop_caches (mode 0200)
    // is write-only even for root.
    std::string path = "/proc/sys/vm/drop_caches";
    if (::geteuid() != 0) {
      path = policy_file("cache: {max_plans: 2}\n");
      REQUIRE(::chmod(path.c_str(), 0) == 0);
    }
    check_refused(path, "cannot open the file: Permission denied");
  }
}

TEST_CASE("a size-0 /proc file is read like any other", "[config]") {
  auto o = load("/proc/self/status");  // "Name:\tgradd_tests" first
  REQUIRE(o.config_error);
  CHECK(o.line == 1);
  CHECK(o.key == "Name");
  CHECK_THAT(o.what, Catch::Contains("unknown section"));
}

TEST_CASE("what a policy may hold besides keys: comments, markers, BOM, CRLF, quotes",
          "[config]") {
  struct tolerated {
    const char* kind;
    std::string text;
  };
  const tolerated cases[] = {
      {"comments only", "# nothing set\n# at all\n"},
      {"a document start marker", "---\ncompile:\n  mode: sync\n"},
      {"a document end marker", "compile:\n  mode: sync\n...\n"},
      {"a UTF-8 byte order mark", "\xEF\xBB\xBF" "compile:\n  mode: sync\n"},
      {"CRLF line ends", "compile:\r\n  mode: sync\r\n"},
      {"a tab after the colon", "compile:\n  mode:\tsync\n"},
      {"quoted values", "compile:\n  mode: \"sync\"\n  threads: '3'\n"},
      {"a flow map", "compile: {mode: sync, threads: 3}\n"},
      {"an empty section", "compile:\n  mode: sync\nfallback:\n"},
      {"UTF-8 text in comments", "# politique: café, 政策, 🙂\ncompile:\n  mode: sync\n"},
      {"exactly 1 MiB",
       "compile: {mode: sync}\n" + std::string(gradd::config::max_policy_bytes - 23, '#') + "\n"},
  };
  for (const auto& c : cases) {
    INFO(c.kind);
    auto path = policy_file(c.text);
    auto o = load(path);
    INFO(o.what);
    CHECK(o.what == "no error");
    if (c.text.find("mode") != std::string::npos)
      CHECK(gradd::load_settings(path).compile.mode == gradd::compile_mode::sync);
  }
}

TEST_CASE("a policy at a UTF-8 path loads", "[config]") {
  auto path = scratch_folder() / "politique-café.yaml";
  std::ofstream(path) << "cache:\n  max_plans: 7\n";
  CHECK(gradd::load_settings(path.string()).cache.max_plans == 7);
}

TEST_CASE("fuzzed policies: each one loads, or is a config_error naming its file",
          "[config][fuzz]") {
  std::ifstream in(std::string(GRADD_SOURCE_DIR) + "/config/gradd.example.yaml");
  std::string example((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(!example.empty());
  // YAML's own characters, where a flip is likeliest to reach a parser path.
  const std::string specials = "[]{}:,&*!|>'\"%@`#-?\t\n\r\\";
  std::mt19937 random(23);
  int loaded = 0, refused = 0;
  for (int i = 0; i < 2000; ++i) {
    auto text = example;
    for (int edits = 1 + random() % 3; edits > 0; --edits) {
      auto at = random() % text.size();
      switch (random() % 4) {
        case 0: text[at] = specials[random() % specials.size()]; break;
        case 1: text[at] = static_cast<char>(random()); break;
        case 2: text.insert(at, 1 + random() % 8, specials[random() % specials.size()]); break;
        default: text.resize(at + 1);
      }
    }
    auto path = policy_file(text);
    auto o = load(path);
    INFO("mutation " << i << ":\n" << text);
    INFO(o.what);
    if (o.what == "no error") {
      ++loaded;
      continue;
    }
    REQUIRE(o.config_error);  // nothing else escapes load_settings
    CHECK(o.file == path);
    ++refused;
  }
  INFO(loaded << " loaded, " << refused << " refused");
  CHECK(loaded > 0);
  CHECK(refused > 0);
}
