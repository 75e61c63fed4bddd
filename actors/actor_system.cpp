// The process's one CAF actor system (see actor_system.hpp).

#include "actors/actor_system.hpp"

#include "actors/daemon_protocol.hpp"
#include "actors/type_ids.hpp"

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>

namespace gradd::actors {

void configure_actor_system(caf::actor_system_config& cfg, size_t workers) {
  cfg.set("scheduler.max-threads", workers);
  cfg.set("work-stealing.moderate-poll-attempts", 0);
  cfg.add_message_types<caf::id_block::gradd>();
  cfg.add_error_category(caf::atom("gradd"), render_daemon_error);
  cfg.load<caf::io::middleman>();
  cfg.set("middleman.app-identifiers", std::vector<std::string>{daemon_protocol_id});
  // A daemon that hangs is noticed (CAF-0.17.md, section 5).
  cfg.set("middleman.heartbeat-interval", caf::timespan{std::chrono::milliseconds(200)});
  cfg.set("middleman.connection-timeout", caf::timespan{std::chrono::milliseconds(1000)});
}

caf::actor_system& process_actor_system() {
  static auto* system = [] {
    auto* cfg = new caf::actor_system_config;
    configure_actor_system(*cfg, 1);
    return new caf::actor_system(*cfg);
  }();
  return *system;
}

} // namespace gradd::actors
