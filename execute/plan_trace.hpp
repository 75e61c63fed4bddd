#pragma once

// What run_plan executed on the calling thread: evidence that a plan served
// a backward which does not come from the statistics (those are counted by
// the code that chooses the path, so a wrong choice would count itself
// right). The tests' gradient check asserts it for every plan-served case.

#include <cstdint>

namespace gradd::execute {

struct plan_trace {
  uint64_t runs = 0;        ///< plans run to the end
  uint64_t node_calls = 0;  ///< nodes a plan called (capture-only steps excluded)
};

/// This thread's trace since it started. Lock-free.
const plan_trace& plan_trace_of_this_thread() noexcept;

/// The same, writable, for run_plan.
plan_trace& mutable_plan_trace() noexcept;

} // namespace gradd::execute
