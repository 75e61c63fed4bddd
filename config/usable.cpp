// Checks of settings against the machine, made when gradd is enabled.
//
// The IR dump writes from a compile stage, long after enable, and a failed
// write there is silent; so enable creates the folder and writes a probe
// file into it. Writing is the only honest test of "writable": access(2)
// says yes to root for a read-only folder, and root ignores permission bits.

#include "config/usable.hpp"

#include "config/loader.hpp"
#include "config/schema.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace gradd {

namespace {

[[noreturn]] void refuse_dump_dir(const settings& s, const std::string& why) {
  throw config_error(s.source.empty() ? "<settings>" : s.source, 0, "logging.ir_dump_dir",
                     config::quoted(s.logging.ir_dump_dir) + " " + why);
}

} // namespace

void check_usable(const settings& s) {
  const auto& folder = s.logging.ir_dump_dir;
  if (folder.empty())
    return;
  std::error_code error;
  auto found = std::filesystem::status(folder, error);
  if (std::filesystem::exists(found) && !std::filesystem::is_directory(found))
    refuse_dump_dir(s, "is not a directory");
  if (!std::filesystem::exists(found)) {
    std::filesystem::create_directories(folder, error);
    if (error)
      refuse_dump_dir(s, "cannot be created: " + error.message());
  }
  auto probe = (std::filesystem::path(folder) / ".gradd-write-check-XXXXXX").string();
  int fd = ::mkstemp(probe.data());
  if (fd < 0)
    refuse_dump_dir(s, "is not writable: " + std::generic_category().message(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

} // namespace gradd
