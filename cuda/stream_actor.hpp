#pragma once

// The stream actors: one per (device, stream) that CUDA graphs replay on.
// Each owns the captures for its stream: it runs on a thread of its own
// (a detached CAF actor), records and warms up on the training stream,
// captures on a stream of its own in thread-local capture mode (the
// training thread keeps running meanwhile, see ../shared/DESIGN.md, CUDA),
// and publishes each graph into the graph cache, evicting beyond the
// structure's cap. Training threads reach them through an intake actor,
// with orders that name a capture, never carry it. Replays do not pass
// through them: the backward's thread launches a published graph itself
// (docs/design.md, "CUDA graphs").

#include <chrono>
#include <cstdint>
#include <memory>

namespace gradd::cuda {

struct capture_request;
struct structure_graphs;

/// Leaves `request` in the slot of its shape in `graphs` (reserved by the
/// caller) and orders its capture from the stream actor of its stream,
/// spawned on first use. Never blocks. Returns false, doing nothing, once
/// captures drain (process exit).
bool request_capture(structure_graphs& graphs, std::shared_ptr<capture_request> request);

/// Captures queued or running.
uint64_t captures_in_flight();

/// Waits until no capture is queued or running, at most `timeout`.
bool wait_captures(std::chrono::milliseconds timeout);

/// At process exit: refuses new captures, drops queued ones and waits at
/// most `grace` for the running one of each actor. Touches no actor.
bool drain_captures(std::chrono::milliseconds grace);

} // namespace gradd::cuda
