// Post-processing of a backward served by a plan. GraphTask's own
// exec_post_processing is private to libtorch; this is its contract,
// restated (engine.cpp, Note [Streaming backwards]).

#include "engine/detail/post_processing.hpp"

#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <torch/csrc/autograd/graph_task.h>

#include <mutex>

namespace gradd::engine::detail {

void run_post_processing(torch::autograd::GraphTask& task) {
  std::vector<c10::Stream> caller_streams;
  if (!task.leaf_streams.empty()) {
    for (const auto& leaf : task.leaf_streams) {
      const auto& caller = task.caller_current_streams_[leaf.device_index()];
      if (caller.has_value() && *caller != leaf) {
        c10::Event event{leaf.device_type()};
        event.record(leaf);
        caller->wait(event);
      }
    }
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

} // namespace gradd::engine::detail
