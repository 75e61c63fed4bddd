// The process's one CAF actor system (see actor_system.hpp).

#include "actors/actor_system.hpp"

#include "actors/type_ids.hpp"

#include <caf/all.hpp>

namespace gradd::actors {

caf::actor_system& process_actor_system() {
  static auto* system = [] {
    auto* cfg = new caf::actor_system_config;
    cfg->set("scheduler.max-threads", 1);
    cfg->set("work-stealing.moderate-poll-attempts", 0);
    cfg->add_message_types<caf::id_block::gradd>();
    return new caf::actor_system(*cfg);
  }();
  return *system;
}

} // namespace gradd::actors
