#pragma once

// The functional backwards bound in this process, by node name.
//
// A generated node hands its functional backward to the PyCompilerInterface
// (`bind_function`) only the first time it runs under any interface, so a
// later capture would never see it again: the registry keeps every binding
// for the life of the process, and recordings hold the functional they call.

#include <torch/csrc/autograd/function.h>

#include <memory>
#include <string>

namespace gradd::functional {

/// A functional backward as bound.
struct functional_binding {
  std::shared_ptr<const torch::autograd::functional_apply_t> fn;  ///< null: none bound
  bool custom_function = false;  ///< a custom autograd function's: user code
};

/// Binds `fn` under `name` (a node's `name()`, e.g. "MmBackward0"; a custom
/// function's `typeid` name), replacing an earlier binding. Thread-safe.
void bind_functional(const std::string& name, torch::autograd::functional_apply_t fn,
                     bool custom_function);

/// Returns the functional backward bound under `name` in this process, with
/// a null `fn` if none was bound yet. Thread-safe.
functional_binding bound_functional(const std::string& name);

} // namespace gradd::functional
