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
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>

namespace gradd {

namespace {

[[noreturn]] void refuse(const std::string& path, const std::string& why) {
  throw std::runtime_error("gradd: token file '" + path + "' " + why);
}

/// The folder holding `path`, as written.
std::string folder_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

/// Refuses `path` if `folder` (where it is, as `where` says) lets another
/// user swap the file for one of theirs, or for a link to another of ours:
/// the folder must belong to this user (or root, who could anyway) and be
/// writable by nobody else, as ssh asks of ~/.ssh.
void check_folder(const std::string& path, const std::string& folder, const std::string& where) {
  auto in_folder = where + " '" + folder + "', which ";
  struct stat info {};
  if (::stat(folder.c_str(), &info) != 0)
    refuse(path, in_folder + "cannot be read: " + std::strerror(errno));
  if (info.st_uid != ::getuid() && info.st_uid != 0)
    refuse(path, in_folder + "belongs to another user (uid " + std::to_string(info.st_uid) + ")");
  if ((info.st_mode & 022) != 0) {
    std::ostringstream mode;
    mode << std::oct << std::setw(4) << std::setfill('0') << (info.st_mode & 07777);
    refuse(path, in_folder + "others can write to (mode " + mode.str() + "; only its owner may)");
  }
}

/// Checks the folder `path` is in as written and, where links lead
/// elsewhere, the folder of the file it reaches.
void check_folders(const std::string& path) {
  check_folder(path, folder_of(path), "is in folder");
  std::unique_ptr<char, decltype(&std::free)> real(::realpath(path.c_str(), nullptr), &std::free);
  if (real && folder_of(real.get()) != folder_of(path))
    check_folder(path, folder_of(real.get()), "leads to folder");
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
  check_folders(path);
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
  check_folders(path);
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
