#pragma once

// The messages between gradd's pipeline stages. Each names its content; the
// stage interfaces (the *_actor.hpp aliases) say which stage takes which.

#include "actors/ir_inspect.hpp"

#include <caf/error.hpp>

#include <cstdint>
#include <string>

namespace gradd::actors {

/// A captured node table on its way to lowering (capture stage).
struct capture_job {
  uint64_t graph_id = 0;
  compiler::graph ir;
};

/// Node-level IR on its way through the passes (pass-pipeline stage).
struct pass_job {
  uint64_t graph_id = 0;
  compiler::graph ir;
};

/// IR ready to become a plan (compile stage).
struct compile_job {
  uint64_t graph_id = 0;
  compiler::graph ir;
};

/// The outcome of one graph's trip through the pipeline (registry stage).
struct compile_result {
  uint64_t graph_id = 0;
  compiler::graph ir;
  compiler::plan plan;
  caf::error error;  ///< why it failed (errors.hpp); none when it compiled

  bool ok() const { return !error; }
};

/// Asks the registry for its counts once `submitted` graphs have settled
/// (at once for 0): wait_for_compiles and statistics, as a request.
struct settled_request {
  uint64_t submitted = 0;
};

/// The registry's counts.
struct compile_counts {
  uint64_t settled = 0;   ///< graphs the registry settled, dropped ones included
  uint64_t compiles = 0;  ///< of those, compiles that finished (ready or failed)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, capture_job& x) {
  return f(caf::meta::type_name("gradd.capture_job"), x.graph_id, x.ir);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pass_job& x) {
  return f(caf::meta::type_name("gradd.pass_job"), x.graph_id, x.ir);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, compile_job& x) {
  return f(caf::meta::type_name("gradd.compile_job"), x.graph_id, x.ir);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, compile_result& x) {
  return f(caf::meta::type_name("gradd.compile_result"), x.graph_id, x.ir, x.plan, x.error);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, settled_request& x) {
  return f(caf::meta::type_name("gradd.settled_request"), x.submitted);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, compile_counts& x) {
  return f(caf::meta::type_name("gradd.compile_counts"), x.settled, x.compiles);
}

} // namespace gradd::actors
