// The daemon's token file (see token_file.hpp). POSIX calls throughout: the
// libstdc++ std::filesystem that libtorch.so exports is older than ours
// (README, "std::filesystem").

#include "config/token_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <random>
#include <sstream>
#include <stdexcept>

namespace gradd {

namespace {

[[noreturn]] void refuse(const std::string& path, const std::string& why) {
  throw std::runtime_error("gradd: token file '" + path + "' " + why);
}

/// 32 hex digits from the system's entropy source.
std::string random_token() {
  std::random_device entropy;
  std::ostringstream out;
  out << std::hex;
  for (int i = 0; i < 4; ++i)
    out << std::setw(8) << std::setfill('0') << entropy();
  return out.str();
}

} // namespace

std::string token_file_path(const settings& s) {
  if (const char* env = std::getenv("GRADD_TOKEN_FILE"); env && *env)
    return env;
  if (!s.daemon.token_file.empty())
    return s.daemon.token_file;
  return "/tmp/gradd-" + std::to_string(::getuid()) + "/token";
}

std::string read_token(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0)
    refuse(path, std::string("cannot be read: ") + std::strerror(errno));
  if (!S_ISREG(info.st_mode))
    refuse(path, "is not a regular file");
  if (info.st_uid != ::getuid())
    refuse(path, "belongs to another user");
  if ((info.st_mode & 077) != 0)
    refuse(path, "is open to other users (mode must be 0600)");
  std::ifstream in(path);
  std::string token;
  std::getline(in, token);
  if (token.empty())
    refuse(path, "is empty");
  return token;
}

std::string read_or_create_token(const std::string& path) {
  if (::access(path.c_str(), F_OK) == 0)
    return read_token(path);
  auto slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    auto folder = path.substr(0, slash);
    if (::mkdir(folder.c_str(), 0700) != 0 && errno != EEXIST)
      refuse(path, "cannot be created: its folder: " + std::string(std::strerror(errno)));
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    if (errno == EEXIST)  // another daemon made it a moment ago
      return read_token(path);
    refuse(path, std::string("cannot be created: ") + std::strerror(errno));
  }
  auto token = random_token() + "\n";
  bool written = ::write(fd, token.data(), token.size()) == static_cast<ssize_t>(token.size());
  ::close(fd);
  if (!written)
    refuse(path, "could not be written");
  return read_token(path);
}

} // namespace gradd
