// Checks of settings against the machine, made when gradd is enabled.
//
// The IR dump and the plan cache write from the pipeline, long after
// enable, and a failed write there is silent; so enable creates each folder
// and writes a probe file into it. Writing is the only honest test of "writable": access(2)
// says yes to root for a read-only folder, and root ignores permission bits.

#include "config/usable.hpp"

#include "config/daemon_address.hpp"
#include "config/loader.hpp"
#include "config/schema.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace gradd {

namespace {

/// Makes sure `folder` (policy key `key`) is a directory gradd can write in,
/// creating it if missing.
void check_writable_folder(const settings& s, const std::string& key, const std::string& folder) {
  if (folder.empty())
    return;
  auto refuse = [&](const std::string& why) {
    throw config_error(s.source.empty() ? "<settings>" : s.source, 0, key,
                       config::quoted(folder) + " " + why);
  };
  std::error_code error;
  auto found = std::filesystem::status(folder, error);
  if (std::filesystem::exists(found) && !std::filesystem::is_directory(found))
    refuse("is not a directory");
  if (!std::filesystem::exists(found)) {
    std::filesystem::create_directories(folder, error);
    if (error)
      refuse("cannot be created: " + error.message());
  }
  auto probe = (std::filesystem::path(folder) / ".gradd-write-check-XXXXXX").string();
  int fd = ::mkstemp(probe.data());
  if (fd < 0)
    refuse("is not writable: " + std::generic_category().message(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

} // namespace

void check_usable(const settings& s) {
  check_writable_folder(s, "logging.ir_dump_dir", s.logging.ir_dump_dir);
  check_writable_folder(s, "cache.dir", s.cache.dir);
  const char* env = std::getenv("GRADD_DAEMON");
  if (env && *env && !parse_daemon_address(env))
    throw config_error("<environment>", 0, "daemon.address",
                       "GRADD_DAEMON=" + config::quoted(env) + " is not host:port");
}

} // namespace gradd
