// `gradd status` output (see status_text.hpp).

#include "daemon/status_text.hpp"

#include <map>
#include <set>
#include <sstream>
#include <string_view>
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

/// The daemon-wide counters that say what is held or running now (gauges);
/// the others only grow.
bool daemon_gauge(std::string_view name) {
  return name == "clients" || name == "structures" || name == "in_flight";
}

/// A rank's statistics that say what is alive or held now (gauges); the
/// others only grow. Per structure (`structure.<id>.<field>`), the counts of
/// its backwards grow, its shape does not.
bool rank_gauge(std::string_view metric) {
  static const std::set<std::string_view> gauges{
      "plans",           "compiles_in_flight",     "graphs",
      "graph_bytes",     "graph_bound_bytes",      "structure_nodes",
      "structure_graph_pieces", "structure_live_nodes", "structure_plans_only"};
  return gauges.count(metric) > 0;
}

/// One sample of a Prometheus family: its labels and value.
struct sample {
  std::string labels;
  uint64_t value = 0;
};

/// The families of the ranks' statistics, each with every rank's samples
/// (the text format wants a family's samples together): gradd_rank_<name>,
/// with "eager.<reason>" as gradd_rank_eager_backwards_by_reason and
/// "structure.<id>.<field>" as gradd_rank_structure_<field>, the reason or
/// the structure a label. In order of first appearance.
std::vector<std::pair<std::string, std::vector<sample>>> rank_families(
    const actors::daemon_status& s) {
  std::vector<std::pair<std::string, std::vector<sample>>> families;
  std::map<std::string, size_t> index;
  for (const auto& c : s.per_client)
    for (size_t i = 0; i < c.report.names.size(); ++i) {
      const auto& name = c.report.names[i];
      std::string metric = name;
      std::string label;
      if (name.rfind("eager.", 0) == 0) {
        metric = "eager_backwards_by_reason";
        label = ",reason=\"" + name.substr(6) + "\"";
      } else if (auto dot = name.find('.', 10); name.rfind("structure.", 0) == 0 && dot != name.npos) {
        metric = "structure_" + name.substr(dot + 1);
        label = ",structure=\"" + name.substr(10, dot - 10) + "\"";
      }
      auto [at, added] = index.emplace(metric, families.size());
      if (added)
        families.emplace_back(metric, std::vector<sample>{});
      families[at->second].second.push_back(
          {"client=\"" + std::to_string(c.id) + "\",pid=\"" + std::to_string(c.pid)
               + "\",rank=\"" + std::to_string(c.rank) + "\"" + label,
           c.report.values[i]});
    }
  return families;
}

std::string as_prometheus(const actors::daemon_status& s) {
  std::ostringstream out;
  for (const auto& [name, value] : counters(s))
    out << "# TYPE gradd_daemon_" << name << (daemon_gauge(name) ? " gauge" : " counter")
        << "\ngradd_daemon_" << name << " " << value << "\n";
  out << "# TYPE gradd_daemon_client_requests counter\n";
  for (const auto& c : s.per_client)
    out << "gradd_daemon_client_requests{client=\"" << c.id << "\",pid=\"" << c.pid
        << "\",rank=\"" << c.rank << "\"} " << c.requests << "\n";
  out << "# TYPE gradd_daemon_client_served_without_compile counter\n";
  for (const auto& c : s.per_client)
    out << "gradd_daemon_client_served_without_compile{client=\"" << c.id << "\",pid=\"" << c.pid
        << "\",rank=\"" << c.rank << "\"} " << c.served_without_compile << "\n";
  for (const auto& [metric, samples] : rank_families(s)) {
    out << "# TYPE gradd_rank_" << metric << (rank_gauge(metric) ? " gauge" : " counter") << "\n";
    for (const auto& one : samples)
      out << "gradd_rank_" << metric << "{" << one.labels << "} " << one.value << "\n";
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
