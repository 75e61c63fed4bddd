// The daemon's token file: read only where no other user could have put or
// swapped it, the file and its folder, as ssh checks ~/.ssh.

#include "config/policy_files.hpp"
#include "config/token_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <fstream>

namespace {

using gradd::read_token;
using gradd::test::scratch_folder;

/// A fresh folder of mode `folder_mode` holding the token file `token`, of
/// mode `file_mode`.
std::string token_in(mode_t folder_mode, mode_t file_mode = 0600) {
  auto folder = scratch_folder();
  auto path = (folder / "token").string();
  std::ofstream(path) << "0123456789abcdef\n";
  REQUIRE(::chmod(path.c_str(), file_mode) == 0);
  REQUIRE(::chmod(folder.c_str(), folder_mode) == 0);
  return path;
}

} // namespace

TEST_CASE("a token file in a folder others can write to is refused, naming the folder",
          "[config][token]") {
  struct folder_case {
    mode_t mode;
    const char* says;  ///< nullptr: accepted
  };
  const folder_case cases[] = {
      {0700, nullptr},
      {0755, nullptr},  // others may list it, not swap the file
      {0750, nullptr},
      {0770, "which others can write to (mode 0770; only its owner may)"},
      {0720, "(mode 0720;"},
      {0702, "(mode 0702;"},
      {01777, "(mode 1777;"},  // sticky, as /tmp: still refused
  };
  for (const auto& c : cases) {
    auto path = token_in(c.mode);
    auto folder = path.substr(0, path.rfind('/'));
    INFO("folder mode " << std::oct << c.mode);
    if (c.says == nullptr) {
      CHECK(read_token(path) == "0123456789abcdef");
    } else {
      CHECK_THROWS_WITH(read_token(path),
                        Catch::Contains("token file '" + path + "' is in folder '" + folder + "'")
                            && Catch::Contains(c.says));
    }
  }
}

TEST_CASE("a token file others can read is refused, one only its owner can is read",
          "[config][token]") {
  CHECK(read_token(token_in(0700, 0600)) == "0123456789abcdef");
  CHECK(read_token(token_in(0700, 0400)) == "0123456789abcdef");
  CHECK_THROWS_WITH(read_token(token_in(0700, 0640)),
                    Catch::Contains("is open to other users (mode must be 0600)"));
  CHECK_THROWS_WITH(read_token(token_in(0700, 0602)), Catch::Contains("is open to other users"));
}

TEST_CASE("a token file in a folder another user owns is refused", "[config][token]") {
  if (::getuid() != 0) {
    WARN("not root: cannot give a folder to another user; skipped");
    return;
  }
  auto path = token_in(0755);
  auto folder = path.substr(0, path.rfind('/'));
  CHECK(read_token(path) == "0123456789abcdef");  // the same folder, still root's
  REQUIRE(::chown(folder.c_str(), 65534, 65534) == 0);
  CHECK_THROWS_WITH(read_token(path), Catch::Contains("is in folder '" + folder
                                                      + "', which belongs to another user "
                                                        "(uid 65534)"));
}

TEST_CASE("a token file another user owns is refused, in a folder of this user's",
          "[config][token]") {
  if (::getuid() != 0) {
    WARN("not root: cannot give a file to another user; skipped");
    return;
  }
  auto path = token_in(0700);
  CHECK(read_token(path) == "0123456789abcdef");  // the same file, still root's
  REQUIRE(::chown(path.c_str(), 65534, 65534) == 0);
  CHECK_THROWS_WITH(read_token(path), Catch::Contains("token file '" + path
                                                      + "' belongs to another user"));
}

TEST_CASE("a linked token file is read only if both the link's folder and the file's are safe",
          "[config][token]") {
  auto good_target = token_in(0700);
  auto open_target = token_in(0777);
  auto link_in = [](mode_t folder_mode, const std::string& target) {
    auto folder = scratch_folder();
    auto link = (folder / "token").string();
    REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
    REQUIRE(::chmod(folder.c_str(), folder_mode) == 0);
    return link;
  };
  CHECK(read_token(link_in(0700, good_target)) == "0123456789abcdef");
  auto open_folder = open_target.substr(0, open_target.rfind('/'));
  CHECK_THROWS_WITH(read_token(link_in(0700, open_target)),
                    Catch::Contains("leads to folder '" + open_folder
                                    + "', which others can write to"));
  auto link = link_in(0777, good_target);
  CHECK_THROWS_WITH(read_token(link),
                    Catch::Contains("is in folder '" + link.substr(0, link.rfind('/'))
                                    + "', which others can write to"));
}

TEST_CASE("read_or_create_token makes a folder of 0700, and creates nothing in a folder it refuses",
          "[config][token]") {
  auto folder = scratch_folder() / "made";
  auto path = (folder / "token").string();
  auto token = gradd::read_or_create_token(path);
  CHECK(token.size() == 32);
  struct stat info {};
  REQUIRE(::stat(folder.c_str(), &info) == 0);
  CHECK((info.st_mode & 07777) == 0700);
  REQUIRE(::stat(path.c_str(), &info) == 0);
  CHECK((info.st_mode & 07777) == 0600);
  CHECK(gradd::read_or_create_token(path) == token);  // read, not made again

  auto kept = scratch_folder();  // an existing folder only its owner writes: used
  REQUIRE(::chmod(kept.c_str(), 0755) == 0);
  CHECK(gradd::read_or_create_token((kept / "token").string()).size() == 32);

  auto open = scratch_folder();
  REQUIRE(::chmod(open.c_str(), 0777) == 0);
  auto refused = (open / "token").string();
  CHECK_THROWS_WITH(gradd::read_or_create_token(refused),
                    Catch::Contains("which others can write to (mode 0777;"));
  CHECK(::access(refused.c_str(), F_OK) != 0);
}
