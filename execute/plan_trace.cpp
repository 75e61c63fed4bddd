// One trace per thread: run_plan runs on the backward's own thread, so a
// test reads what its own backwards did, whatever other threads run.

#include "execute/plan_trace.hpp"

namespace gradd::execute {

namespace {
thread_local plan_trace trace;
}

const plan_trace& plan_trace_of_this_thread() noexcept {
  return trace;
}

plan_trace& mutable_plan_trace() noexcept {
  return trace;
}

} // namespace gradd::execute
