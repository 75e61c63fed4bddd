#pragma once

// `gradd status`'s three forms of the daemon's statistics: text for people,
// one JSON object, and Prometheus's text exposition format.

#include "actors/daemon_protocol.hpp"

#include <string>

namespace gradd::daemon {

/// `status` as "text", "json" or "prometheus".
std::string format_status(const actors::daemon_status& status, const std::string& format);

} // namespace gradd::daemon
