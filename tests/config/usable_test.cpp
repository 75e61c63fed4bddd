// Settings checked against the machine at enable: an IR dump folder gradd
// cannot write in is a config_error naming the key and where the settings
// came from.

#include "config/policy_files.hpp"
#include "config/usable.hpp"
#include "gradd/policy.hpp"

#include <catch2/catch.hpp>

using gradd::test::policy_file;
using gradd::test::scratch_folder;

namespace {

gradd::settings dumping_to(const std::string& folder) {
  gradd::settings s;
  s.logging.ir_dump_dir = folder;
  return s;
}

/// Checks that `s` is refused for its ir_dump_dir, with `says` in the message.
void check_refused(const gradd::settings& s, const std::string& file, const std::string& says) {
  INFO("ir_dump_dir: " << s.logging.ir_dump_dir);
  try {
    gradd::check_usable(s);
    FAIL("no error");
  } catch (const gradd::config_error& e) {
    CHECK(e.file() == file);
    CHECK(e.line() == 0);
    CHECK(e.key() == "logging.ir_dump_dir");
    CHECK_THAT(e.what(), Catch::Contains(says));
  }
}

} // namespace

TEST_CASE("settings without an IR dump folder are usable", "[config]") {
  CHECK_NOTHROW(gradd::check_usable(gradd::settings{}));
}

TEST_CASE("a missing IR dump folder is created with its parents", "[config]") {
  auto folder = scratch_folder() / "a" / "b";
  gradd::check_usable(dumping_to(folder.string()));
  CHECK(std::filesystem::is_directory(folder));
  CHECK(std::filesystem::is_empty(folder));  // the write probe is gone
}

TEST_CASE("an IR dump folder gradd cannot write in is refused", "[config]") {
  auto file = policy_file("");
  // The CI runs as root, which writes in a chmod-000 folder: the unwritable
  // places here are under /proc and under a regular file.
  check_refused(dumping_to(file), "<settings>", "is not a directory");
  check_refused(dumping_to(file + "/ir"), "<settings>", "cannot be created: Not a directory");
  check_refused(dumping_to("/proc/gradd-ir"), "<settings>", "cannot be created");
  check_refused(dumping_to("/proc/self"), "<settings>", "is not writable");
}

TEST_CASE("an unusable IR dump folder from a policy names the policy file", "[config]") {
  auto under_file = policy_file("") + "/ir";
  auto path = policy_file("logging:\n  ir_dump_dir: " + under_file + "\n");
  auto s = gradd::load_settings(path);
  check_refused(s, path, "'" + under_file + "' cannot be created");
}

TEST_CASE("a plan cache folder gradd cannot write in is refused, naming cache.dir", "[config]") {
  gradd::settings s;
  s.cache.dir = policy_file("");  // a regular file
  try {
    gradd::check_usable(s);
    FAIL("a file as cache.dir was accepted");
  } catch (const gradd::config_error& e) {
    CHECK(e.key() == "cache.dir");
    CHECK_THAT(e.what(), Catch::Contains("is not a directory"));
  }
  s.cache.dir = (scratch_folder() / "plans").string();
  CHECK_NOTHROW(gradd::check_usable(s));
  CHECK(std::filesystem::is_directory(s.cache.dir));
}
