// The daemon's JSON-lines log (see daemon_log.hpp).

#include "daemon/daemon_log.hpp"

#include "config/log.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <sstream>

namespace gradd::daemon {

namespace {

void write_json_string(std::ostringstream& out, const std::string& text) {
  out << '"';
  for (unsigned char c : text) {
    switch (c) {
      case '"': out << "\\\""; break;
      case '\\': out << "\\\\"; break;
      case '\n': out << "\\n"; break;
      case '\r': out << "\\r"; break;
      case '\t': out << "\\t"; break;
      default:
        if (c < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
          out << escaped;
        } else {
          out << c;
        }
    }
  }
  out << '"';
}

std::string utc_now() {
  auto now = std::chrono::system_clock::now();
  auto seconds = std::chrono::system_clock::to_time_t(now);
  auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  char with_millis[40];
  std::snprintf(with_millis, sizeof with_millis, "%s.%03dZ", text, static_cast<int>(millis.count()));
  return with_millis;
}

} // namespace

void log_event(log_level configured, log_level level, const std::string& event,
               std::initializer_list<std::pair<const char*, log_value>> fields) {
  if (level > configured)
    return;
  std::ostringstream out;
  out << "{\"time\":\"" << utc_now() << "\",\"level\":\"" << to_string(level) << "\",\"event\":";
  write_json_string(out, event);
  for (const auto& [name, value] : fields) {
    out << ",\"" << name << "\":";
    if (auto* text = std::get_if<std::string>(&value))
      write_json_string(out, *text);
    else
      std::visit([&](const auto& number) { out << number; }, value);
  }
  out << "}\n";
  // One write per line keeps lines from concurrent threads whole.
  std::fputs(out.str().c_str(), stderr);
}

std::string hex(uint64_t key) {
  std::ostringstream out;
  out << std::hex << key;
  return out.str();
}

} // namespace gradd::daemon
