// gradd's stderr log, filtered by the policy's logging.level.

#include "config/log.hpp"

#include <cstdio>

namespace gradd {

const char* to_string(log_level level) {
  switch (level) {
    case log_level::error: return "error";
    case log_level::warning: return "warning";
    case log_level::info: return "info";
    case log_level::debug: return "debug";
  }
  return "?";
}

void log(log_level configured, log_level level, const std::string& message) {
  if (level > configured)
    return;
  // One fprintf per line keeps lines from concurrent threads whole.
  std::fprintf(stderr, "gradd [%s]: %s\n", to_string(level), message.c_str());
}

} // namespace gradd
