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

namespace gradd::engine::functional {

/// Binds `fn` under `name` (a node's `name()`, e.g. "MmBackward0"),
/// replacing an earlier binding. Thread-safe.
void bind_functional(const std::string& name, torch::autograd::functional_apply_t fn);

/// Returns the functional backward bound under `name` in this process, or
/// null if none was bound yet. Thread-safe.
std::shared_ptr<const torch::autograd::functional_apply_t> bound_functional(
    const std::string& name);

} // namespace gradd::engine::functional
