// The daemon protocol's keys and names (see daemon_protocol.hpp).

#include "actors/daemon_protocol.hpp"

#include "compiler/portable_key.hpp"

namespace gradd::actors {

uint64_t request_key(const compile_request& request) {
  return request_key(request.passes, request.table);
}

uint64_t request_key(const std::string& passes, const compiler::graph& table) {
  return compiler::shared_plan_key(table, compiler::plan_variant(passes));
}

std::string to_string(plan_source source) {
  switch (source) {
    case plan_source::compiled: return "compiled";
    case plan_source::shared: return "shared";
    case plan_source::cached: return "cached";
    case plan_source::disk: return "disk";
  }
  return "unknown";
}

} // namespace gradd::actors
