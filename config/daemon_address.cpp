// "host:port" (see daemon_address.hpp).

#include "config/daemon_address.hpp"

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

std::optional<daemon_address> configured_daemon(const settings& s) {
  const char* env = std::getenv("GRADD_DAEMON");
  auto address = parse_daemon_address(env && *env ? env : s.daemon.address);
  if (!address || address->port == 0)
    return std::nullopt;
  return address;
}

} // namespace gradd
