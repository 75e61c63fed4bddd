#pragma once

// The messages between gradd's pipeline stages. Each names its content; the
// stage interfaces (the *_actor.hpp aliases) say which stage takes which.

#include "actors/ir_inspect.hpp"

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
  bool ok = false;
  compiler::graph ir;
  compiler::plan plan;
  std::string error;  ///< why it failed, naming the stage

  /// A failed result for graph `id`: `stage` and what went wrong.
  static compile_result failure(uint64_t id, const std::string& stage, const char* what) {
    compile_result r;
    r.graph_id = id;
    r.error = stage + ": " + what;
    return r;
  }
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
  return f(caf::meta::type_name("gradd.compile_result"), x.graph_id, x.ok, x.ir, x.plan,
           x.error);
}

} // namespace gradd::actors
