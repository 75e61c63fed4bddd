// `gradd status` output (see status_text.hpp).

#include "daemon/status_text.hpp"

#include <sstream>
#include <utility>
#include <vector>

namespace gradd::daemon {

namespace {

/// The daemon-wide counters, by name, in the order every form lists them.
std::vector<std::pair<const char*, uint64_t>> counters(const actors::daemon_status& s) {
  return {{"clients", s.clients},       {"requests", s.requests},
          {"compiles", s.compiles},     {"compiles_saved", s.compiles_saved},
          {"disk_loads", s.disk_loads}, {"failed", s.failed},
          {"refused", s.refused},       {"structures", s.structures},
          {"in_flight", s.in_flight},   {"agreements", s.agreements},
          {"store_agreements", s.store_agreements}};
}

std::string as_text(const actors::daemon_status& s) {
  std::ostringstream out;
  out << "gradd daemon (gradd " << s.gradd_version << ", torch " << s.torch_version << ")\n";
  for (const auto& [name, value] : counters(s))
    out << "  " << name << ": " << value << "\n";
  for (const auto& c : s.per_client) {
    out << "  client " << c.id << ": pid " << c.pid << " rank " << c.rank << ", " << c.requests
        << " requests, " << c.served_without_compile << " served without a compile\n   ";
    for (size_t i = 0; i < c.report.names.size(); ++i)
      out << " " << c.report.names[i] << "=" << c.report.values[i];
    out << "\n";
  }
  return out.str();
}

std::string as_json(const actors::daemon_status& s) {
  std::ostringstream out;
  out << "{\"gradd_version\":\"" << s.gradd_version << "\",\"torch_version\":\""
      << s.torch_version << "\"";
  for (const auto& [name, value] : counters(s))
    out << ",\"" << name << "\":" << value;
  out << ",\"per_client\":[";
  for (size_t i = 0; i < s.per_client.size(); ++i) {
    const auto& c = s.per_client[i];
    out << (i ? "," : "") << "{\"id\":" << c.id << ",\"pid\":" << c.pid << ",\"rank\":" << c.rank
        << ",\"requests\":" << c.requests
        << ",\"served_without_compile\":" << c.served_without_compile << ",\"statistics\":{";
    for (size_t j = 0; j < c.report.names.size(); ++j)
      out << (j ? "," : "") << "\"" << c.report.names[j] << "\":" << c.report.values[j];
    out << "}}";
  }
  out << "]}\n";
  return out.str();
}

std::string as_prometheus(const actors::daemon_status& s) {
  std::ostringstream out;
  for (const auto& [name, value] : counters(s))
    out << "# TYPE gradd_daemon_" << name << " gauge\ngradd_daemon_" << name << " " << value
        << "\n";
  out << "# TYPE gradd_daemon_client_requests counter\n";
  for (const auto& c : s.per_client)
    out << "gradd_daemon_client_requests{client=\"" << c.id << "\",pid=\"" << c.pid
        << "\",rank=\"" << c.rank << "\"} " << c.requests << "\n";
  out << "# TYPE gradd_daemon_client_served_without_compile counter\n";
  for (const auto& c : s.per_client)
    out << "gradd_daemon_client_served_without_compile{client=\"" << c.id << "\",pid=\"" << c.pid
        << "\",rank=\"" << c.rank << "\"} " << c.served_without_compile << "\n";
  // A rank's own statistics: gradd_rank_<name>, "eager.<reason>" as a
  // label, "structure.<id>.<field>" as gradd_rank_structure_<field> with
  // the structure as a label.
  for (const auto& c : s.per_client)
    for (size_t i = 0; i < c.report.names.size(); ++i) {
      const auto& name = c.report.names[i];
      std::string metric = name, label;
      if (name.rfind("eager.", 0) == 0) {
        metric = "eager_backwards_by_reason";
        label = ",reason=\"" + name.substr(6) + "\"";
      } else if (auto dot = name.find('.', 10); name.rfind("structure.", 0) == 0 && dot != name.npos) {
        metric = "structure_" + name.substr(dot + 1);
        label = ",structure=\"" + name.substr(10, dot - 10) + "\"";
      }
      out << "gradd_rank_" << metric << "{client=\"" << c.id << "\",pid=\"" << c.pid
          << "\",rank=\"" << c.rank << "\"" << label << "} " << c.report.values[i] << "\n";
    }
  return out.str();
}

} // namespace

std::string format_status(const actors::daemon_status& status, const std::string& format) {
  if (format == "json")
    return as_json(status);
  if (format == "prometheus")
    return as_prometheus(status);
  return as_text(status);
}

} // namespace gradd::daemon
