// Reading a policy file's bytes: which files, how big and which encoding
// gradd accepts, checked before YAML sees a byte.
//
// The path is stat'ed before it is opened, so a FIFO or a device is refused
// without blocking on it (or whatever opening a device does); it is opened
// O_NONBLOCK and checked again on the descriptor, in case the path changed
// in between. /proc files report size 0, so reading stops one byte past the
// cap instead of trusting st_size. The bytes must be UTF-8 text: a NUL, a
// control character, a stray byte or a tab in the indentation gets its line
// number here; yaml-cpp would report something vaguer, or nothing.

#include "config/policy_file.hpp"

#include "gradd/policy.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <system_error>

namespace gradd::config {

namespace {

[[noreturn]] void refuse(const std::string& path, int line, const std::string& why) {
  throw config_error(path, line, "", why);
}

/// strerror's text, thread-safe.
std::string reason_of(int error) {
  return std::generic_category().message(error);
}

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO (named pipe)";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "something else";
}

void require_regular(const std::string& path, const struct stat& st) {
  if (!S_ISREG(st.st_mode))
    refuse(path, 0, "is " + kind_of(st.st_mode) + ", not a regular file");
}

[[noreturn]] void refuse_size(const std::string& path) {
  refuse(path, 0, "holds more than " + std::to_string(max_policy_bytes)
                      + " bytes (1 MiB), the most a policy may have: is it the right file?");
}

[[noreturn]] void refuse_unreachable(const std::string& path, int error) {
  struct stat link {};
  if (error == ENOENT && ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode))
    refuse(path, 0, "cannot open the file: a symbolic link to nothing");
  refuse(path, 0, "cannot open the file: " + reason_of(error));
}

std::string hex(unsigned value, int digits) {
  char text[16];
  std::snprintf(text, sizeof text, "%0*X", digits, value);
  return text;
}

/// Bytes in the UTF-8 sequence that `lead` starts, 0 if it starts none.
size_t sequence_length(unsigned char lead) {
  if (lead >= 0xC2 && lead <= 0xDF)
    return 2;
  if (lead >= 0xE0 && lead <= 0xEF)
    return 3;
  if (lead >= 0xF0 && lead <= 0xF4)
    return 4;
  return 0;
}

/// The code point of the well-formed UTF-8 sequence at `at`, or -1 for a
/// truncated, overlong or surrogate sequence.
long decode(const std::string& text, size_t at, size_t length) {
  if (length == 0 || at + length > text.size())
    return -1;
  static constexpr long lowest[] = {0, 0, 0x80, 0x800, 0x10000};
  long point = static_cast<unsigned char>(text[at]) & (0x7F >> length);
  for (size_t i = 1; i < length; ++i) {
    auto next = static_cast<unsigned char>(text[at + i]);
    if ((next & 0xC0) != 0x80)
      return -1;
    point = point << 6 | (next & 0x3F);
  }
  bool surrogate = point >= 0xD800 && point <= 0xDFFF;
  return point < lowest[length] || surrogate || point > 0x10FFFF ? -1 : point;
}

/// YAML's printable set, less what a policy never needs: C0 and C1 controls
/// but tab, line feed, carriage return and next line.
bool is_control(long point) {
  return (point < 0x20 && point != '\t' && point != '\n' && point != '\r') || point == 0x7F
         || (point >= 0x80 && point <= 0x9F && point != 0x85);
}

/// Whether the line starting at `at` has a tab before its first character.
bool tab_indented(const std::string& text, size_t at) {
  auto first = text.find_first_not_of(" \t", at);
  if (first == std::string::npos || text[first] == '\n' || text[first] == '\r')
    return false;  // blank lines may hold anything
  return text.find('\t', at) < first;
}

void check_text(const std::string& path, const std::string& text) {
  if (text.size() >= 2 && ((text[0] == '\xFF' && text[1] == '\xFE')
                           || (text[0] == '\xFE' && text[1] == '\xFF')))
    refuse(path, 1, "is UTF-16 or UTF-32 (it starts with a byte order mark); save it as UTF-8");
  int line = 1;
  for (size_t at = 0; at < text.size();) {
    if (at == 0 || text[at - 1] == '\n') {
      if (tab_indented(text, at))
        refuse(path, line, "is indented with a tab; YAML indents with spaces");
    }
    auto lead = static_cast<unsigned char>(text[at]);
    if (lead == 0)
      refuse(path, line, "holds a NUL byte: a binary file, or UTF-16? A policy is UTF-8 text");
    size_t length = lead < 0x80 ? 1 : sequence_length(lead);
    long point = length == 1 ? lead : decode(text, at, length);
    if (point < 0)
      refuse(path, line, "is not UTF-8: a bad byte sequence starting with 0x" + hex(lead, 2)
                             + " (Latin-1?); save it as UTF-8");
    if (is_control(point))
      refuse(path, line, "holds the control character U+" + hex(point, 4)
                             + "; a policy is plain UTF-8 text");
    line += point == '\n';
    at += length;
  }
}

/// Closes a file descriptor when it goes out of scope.
struct descriptor {
  explicit descriptor(int fd) : fd(fd) {}
  descriptor(const descriptor&) = delete;
  descriptor& operator=(const descriptor&) = delete;
  ~descriptor() {
    if (fd >= 0)
      ::close(fd);
  }
  int fd;
};

/// Reads at most max_policy_bytes + 1 from `fd`, enough to tell "too big".
std::string read_capped(const std::string& path, int fd) {
  std::string text;
  char chunk[1 << 14];
  while (text.size() <= max_policy_bytes) {
    auto got = ::read(fd, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      refuse(path, 0, "cannot read the file: " + reason_of(errno));
    if (got == 0)
      return text;
    text.append(chunk, static_cast<size_t>(got));
  }
  refuse_size(path);
}

} // namespace

std::string read_policy_file(const std::string& path) {
  if (path.empty())
    refuse(path, 0, "the policy path is empty");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    refuse_unreachable(path, errno);
  require_regular(path, st);
  if (st.st_size > static_cast<off_t>(max_policy_bytes))
    refuse_size(path);
  descriptor file{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)};
  if (file.fd < 0)
    refuse_unreachable(path, errno);
  if (::fstat(file.fd, &st) != 0)
    refuse(path, 0, "cannot read the file: " + reason_of(errno));
  require_regular(path, st);
  auto text = read_capped(path, file.fd);
  check_text(path, text);
  if (text.rfind("\xEF\xBB\xBF", 0) == 0)
    text.erase(0, 3);  // a UTF-8 byte order mark, as some editors write
  return text;
}

} // namespace gradd::config
