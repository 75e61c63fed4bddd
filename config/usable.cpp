// Checks of settings against the machine, made when gradd is enabled.
//
// The IR dump and the plan cache write from the pipeline, long after
// enable, and a failed write there is silent; so enable creates each folder
// and writes a probe file into it. Writing is the only honest test of "writable": access(2)
// says yes to root for a read-only folder, and root ignores permission bits.

#include "config/usable.hpp"

#include "config/daemon_address.hpp"
#include "config/schema.hpp"
#include "gradd/policy.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <system_error>

namespace gradd {

namespace {

/// Creates `folder` and its missing parents; returns 0 or the errno of the
/// step that failed (ENOTDIR where a file is in the way). POSIX calls, not
/// std::filesystem: libtorch.so exports an older build of it, which
/// gradd's calls would bind to (README, Limits).
int make_folders(const std::string& folder) {
  for (auto end = folder.find('/', 1);; end = folder.find('/', end + 1)) {
    auto prefix = folder.substr(0, end);
    if (::mkdir(prefix.c_str(), 0777) != 0) {
      if (errno != EEXIST)
        return errno;
      struct stat found {};
      if (::stat(prefix.c_str(), &found) != 0)
        return errno;
      if (!S_ISDIR(found.st_mode))
        return ENOTDIR;
    }
    if (end == std::string::npos)
      return 0;
  }
}

/// Makes sure `folder` (policy key `key`) is a directory gradd can write in,
/// creating it if missing.
void check_writable_folder(const settings& s, const std::string& key, const std::string& folder) {
  if (folder.empty())
    return;
  auto refuse = [&](const std::string& why) {
    throw config_error(s.source.empty() ? "<settings>" : s.source, 0, key,
                       config::quoted(folder) + " " + why);
  };
  struct stat found {};
  if (::stat(folder.c_str(), &found) == 0 && !S_ISDIR(found.st_mode))
    refuse("is not a directory");
  if (int error = make_folders(folder))
    refuse("cannot be created: " + std::generic_category().message(error));
  auto probe = folder + "/.gradd-write-check-XXXXXX";
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
