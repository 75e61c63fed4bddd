#pragma once

// The process's one CAF actor system (CAF-0.17.md, section 1).

#include <cstddef>

namespace caf {
class actor_system;
class actor_system_config;
} // namespace caf

namespace gradd::actors {

/// The actor system every gradd actor lives in: created on first use (one
/// CAF worker: gradd's actors only pass messages, heavy work runs on TBB or
/// on a detached actor's own thread) and never destroyed: ~actor_system
/// hangs when it runs on another thread than the one that created it, and
/// at process exit it frees memory CAF's own statics already released.
caf::actor_system& process_actor_system();

/// Makes `host`, a host program's own actor system (set up with
/// configure_actor_system), the one gradd's actors live in: the in-process
/// actor API (docs/design.md, "A host's actor system"). Call it before gradd
/// first uses an actor system (before enable); returns false when gradd
/// already has another. `host` must outlive gradd's use of it: disable
/// gradd before destroying it.
bool adopt_actor_system(caf::actor_system& host);

/// Sets up `cfg` as every gradd actor system is: `workers` CAF workers
/// polling lightly, gradd's message types and errors, and the middleman,
/// whose brokers carry the daemon's wire.
void configure_actor_system(caf::actor_system_config& cfg, size_t workers);

} // namespace gradd::actors
