// Post-processing of a backward served by a plan. GraphTask's own
// exec_post_processing is private to libtorch; this is its contract,
// restated (engine.cpp, Note [Streaming backwards]).

#include "engine/post_processing.hpp"

#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/autograd/graph_task.h>

#include <mutex>

namespace gradd::engine {

namespace {

/// Makes `caller` wait for the work queued on `leaf` so far.
void wait_for(const c10::Stream& caller, const c10::Stream& leaf) {
  if (caller == leaf)
    return;
  c10::Event event{leaf.device_type()};
  event.record(leaf);
  caller.wait(event);
}

} // namespace

void run_post_processing(torch::autograd::GraphTask& task) {
  std::vector<c10::Stream> caller_streams;
  if (!task.leaf_streams.empty()) {
    for (const auto& leaf : task.leaf_streams)
      if (const auto& caller = task.caller_current_streams_[leaf.device_index()])
        wait_for(*caller, leaf);
    for (const auto& stream : task.caller_current_streams_)
      if (stream)
        caller_streams.push_back(*stream);
  }
  c10::MultiStreamGuard stream_guard(caller_streams);
  // A callback may queue more callbacks: index, don't iterate, and drop the
  // lock while one runs.
  std::unique_lock<std::mutex> lock(task.final_callbacks_lock_);
  for (size_t i = 0; i < task.final_callbacks_.size(); ++i) {
    lock.unlock();
    task.final_callbacks_[i]();
    lock.lock();
  }
}

void join_caller_stream(const c10::Stream& leaf) {
  wait_for(c10::impl::VirtualGuardImpl(leaf.device_type()).getStream(leaf.device()), leaf);
}

} // namespace gradd::engine
