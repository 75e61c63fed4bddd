#pragma once

// The process's one CAF actor system (CAF-0.17.md, section 1).

namespace caf {
class actor_system;
}

namespace gradd::actors {

/// The actor system every gradd actor lives in: created on first use (one
/// CAF worker: gradd's actors only pass messages, heavy work runs on TBB or
/// on a detached actor's own thread) and never destroyed: ~actor_system
/// hangs when it runs on another thread than the one that created it, and
/// at process exit it frees memory CAF's own statics already released.
caf::actor_system& process_actor_system();

} // namespace gradd::actors
