// The process's one CAF actor system (see actor_system.hpp).

#include "actors/actor_system.hpp"

#include "actors/daemon_protocol.hpp"
#include "actors/errors.hpp"
#include "actors/type_ids.hpp"

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>

#include <mutex>

namespace gradd::actors {

void configure_actor_system(caf::actor_system_config& cfg, size_t workers) {
  cfg.set("scheduler.max-threads", workers);
  cfg.set("work-stealing.moderate-poll-attempts", 0);
  cfg.add_message_types<caf::id_block::gradd>();
  cfg.add_error_category(caf::atom("gradd"), render_error);
  cfg.load<caf::io::middleman>();  // for the daemon's wire (wire_frame.hpp), not BASP
}

namespace {

// Never destroyed (actor_system.hpp); plain globals, so nothing runs at exit.
std::mutex system_mutex;
caf::actor_system* the_system = nullptr;

} // namespace

bool adopt_actor_system(caf::actor_system& host) {
  std::lock_guard lock(system_mutex);
  if (the_system != nullptr && the_system != &host)
    return false;
  the_system = &host;
  return true;
}

caf::actor_system& process_actor_system() {
  std::lock_guard lock(system_mutex);
  if (the_system == nullptr) {
    auto* cfg = new caf::actor_system_config;
    configure_actor_system(*cfg, 1);
    the_system = new caf::actor_system(*cfg);
  }
  return *the_system;
}

} // namespace gradd::actors
