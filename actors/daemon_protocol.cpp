// Names for the daemon protocol's codes (see daemon_protocol.hpp).

#include "actors/daemon_protocol.hpp"

#include "compiler/portable_key.hpp"

#include <caf/message.hpp>

namespace gradd::actors {

std::string to_string(daemon_errc code) {
  switch (code) {
    case daemon_errc::wrong_token: return "wrong_token";
    case daemon_errc::wrong_version: return "wrong_version";
    case daemon_errc::not_welcomed: return "not_welcomed";
    case daemon_errc::too_busy: return "too_busy";
    case daemon_errc::compile_failed: return "compile_failed";
    case daemon_errc::stopping: return "stopping";
  }
  return "unknown";
}

caf::error make_error(daemon_errc code, std::string what) {
  return {static_cast<uint8_t>(code), caf::atom("gradd"), caf::make_message(std::move(what))};
}

std::string render_daemon_error(uint8_t code, caf::atom_value, const caf::message& context) {
  auto text = "gradd." + to_string(static_cast<daemon_errc>(code));
  if (context.match_elements<std::string>())
    text += ": " + context.get_as<std::string>(0);
  return text;
}

uint64_t request_key(const compile_request& request) {
  return compiler::portable_key(request.table, compiler::plan_variant(request.passes))
         ^ compiler::sequence_order_key(request.table);
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
