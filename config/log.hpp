#pragma once

#include "gradd/settings.hpp"

#include <string>

namespace gradd {

/// "error", "warning", "info" or "debug".
const char* to_string(log_level level);

/// Writes `message` to stderr as "gradd [level]: message" when `level` is
/// within `configured` (error < warning < info < debug). Thread-safe.
void log(log_level configured, log_level level, const std::string& message);

} // namespace gradd
