#pragma once

// gradd's errors as CAF values: `caf::error`s of category "gradd", with a
// text for the log of whoever it reaches. The daemon refuses with them over
// the network; the pipeline's stages settle a failed compile with them.

// <cstdint> first: CAF 0.17's caf/detail/atom_val.hpp uses uint64_t without
// including it, which newer compilers (the GPU machine's) refuse.
#include <cstdint>

#include <caf/atom.hpp>
#include <caf/error.hpp>

#include <string>

namespace caf {
class message;
}

namespace gradd::actors {

enum class errc : uint8_t {
  wrong_token = 1,  ///< the hello's token is not the daemon's
  wrong_version,    ///< another gradd or torch version
  not_welcomed,     ///< a request on a connection that has not said hello
  too_busy,         ///< a bound on clients, requests in flight or graph size
  compile_failed,   ///< lowering, a pass or plan building failed
  stopping,         ///< the daemon drains after SIGTERM
  no_agreement,     ///< the job's machines did not agree through its store
  cancelled,        ///< gradd stops, or reset() dropped the graph
  timed_out,        ///< compile.timeout_ms passed
  disconnected,     ///< the daemon's connection ended
  bad_message,      ///< a peer broke the daemon's wire protocol
};

std::string to_string(errc code);

/// `code`, with `what` for the log.
caf::error make_error(errc code, std::string what);

/// Whether `error` is gradd's `code`.
bool is(const caf::error& error, errc code);

/// The text `make_error` gave `error` (its context), or "".
std::string what(const caf::error& error);

/// "gradd.<code>: <what>" for gradd's errors, CAF's own text for others.
std::string render(const caf::error& error);

/// Renders gradd's errors in CAF's messages (actor_system_config::
/// add_error_category).
std::string render_error(uint8_t code, caf::atom_value category, const caf::message& context);

} // namespace gradd::actors
