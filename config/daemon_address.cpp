// "host:port" (see daemon_address.hpp).

#include "config/daemon_address.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

namespace gradd {

std::optional<daemon_address> parse_daemon_address(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return std::nullopt;
  auto port = text.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  auto number = std::stoul(port);
  if (number > 65535)
    return std::nullopt;
  return daemon_address{text.substr(0, colon), static_cast<uint16_t>(number)};
}

std::string to_string(const daemon_address& address) {
  return address.host + ":" + std::to_string(address.port);
}

std::optional<uint16_t> free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return std::nullopt;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&address), length) == 0
               && ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  ::close(fd);
  if (!bound)
    return std::nullopt;
  return ntohs(address.sin_port);
}

std::optional<daemon_address> configured_daemon(const settings& s) {
  const char* env = std::getenv("GRADD_DAEMON");
  auto address = parse_daemon_address(env && *env ? env : s.daemon.address);
  if (!address || address->port == 0)
    return std::nullopt;
  return address;
}

} // namespace gradd
