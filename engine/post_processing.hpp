#pragma once

#include <c10/core/Stream.h>

namespace torch::autograd {
struct GraphTask;
}

namespace gradd::engine {

/// Finishes a backward that gradd ran, as GraphTask::exec_post_processing
/// does for the stock engine: makes the caller's current streams wait for the
/// streams the leaves ran on, then runs the callbacks queued with
/// Engine::queue_callback, in order, including ones queued by callbacks.
void run_post_processing(torch::autograd::GraphTask& task);

/// The same for a backward served without a GraphTask, whose leaves ran on
/// `leaf` and which queued no callbacks: makes the thread's current stream
/// of that device wait for it.
void join_caller_stream(const c10::Stream& leaf);

} // namespace gradd::engine
