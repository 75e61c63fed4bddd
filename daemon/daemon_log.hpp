#pragma once

// The daemon's structured log: one JSON object per line on stderr, with the
// time, the level, the event and its fields, filtered by logging.level.
//
//   {"time":"2026-12-01T06:00:00.123Z","level":"info","event":"compiled","key":"9f..","ms":1.2}

#include "gradd/settings.hpp"

#include <initializer_list>
#include <string>
#include <utility>
#include <variant>

namespace gradd::daemon {

/// A field's value: text, or a number written as one.
using log_value = std::variant<std::string, int64_t, uint64_t, double>;

void log_event(log_level configured, log_level level, const std::string& event,
               std::initializer_list<std::pair<const char*, log_value>> fields = {});

/// A structure's key as the log writes it: hexadecimal.
std::string hex(uint64_t key);

} // namespace gradd::daemon
