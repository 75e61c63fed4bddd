// Names and texts of gradd's errors (see errors.hpp).

#include "actors/errors.hpp"

#include <caf/make_message.hpp>
#include <caf/message.hpp>

namespace gradd::actors {

namespace {

constexpr auto category = caf::atom("gradd");

} // namespace

std::string to_string(errc code) {
  switch (code) {
    case errc::wrong_token: return "wrong_token";
    case errc::wrong_version: return "wrong_version";
    case errc::not_welcomed: return "not_welcomed";
    case errc::too_busy: return "too_busy";
    case errc::compile_failed: return "compile_failed";
    case errc::stopping: return "stopping";
    case errc::no_agreement: return "no_agreement";
    case errc::cancelled: return "cancelled";
    case errc::timed_out: return "timed_out";
    case errc::disconnected: return "disconnected";
    case errc::bad_message: return "bad_message";
  }
  return "unknown";
}

caf::error make_error(errc code, std::string what) {
  return {static_cast<uint8_t>(code), category, caf::make_message(std::move(what))};
}

// CAF 0.17's accessors dereference an empty error: ask whether there is one first.

bool is(const caf::error& error, errc code) {
  return error && error.category() == category && error.code() == static_cast<uint8_t>(code);
}

std::string what(const caf::error& error) {
  if (!error)
    return "";
  const auto& context = error.context();
  return context.match_elements<std::string>() ? context.get_as<std::string>(0) : "";
}

std::string render(const caf::error& error) {
  if (!error || error.category() != category)
    return caf::to_string(error);
  return render_error(error.code(), error.category(), error.context());
}

std::string render_error(uint8_t code, caf::atom_value, const caf::message& context) {
  auto text = "gradd." + to_string(static_cast<errc>(code));
  if (context.match_elements<std::string>())
    text += ": " + context.get_as<std::string>(0);
  return text;
}

} // namespace gradd::actors
