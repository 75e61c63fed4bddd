#pragma once

// The in-process actor API (docs/design.md, "A host's actor system"): what a
// C++ program with its own CAF actor system includes to run gradd's stages
// there and to spawn the compile service itself. It speaks gradd's CAF
// message types, so it is for programs built in gradd's tree
// (examples/host_actor_system.cpp); an installed gradd offers the same
// service as `gradd daemon` over the network.

#include "actors/actor_system.hpp"    // configure_actor_system, adopt_actor_system
#include "actors/daemon_link.hpp"     // compile_with
#include "actors/daemon_protocol.hpp" // the service's typed interface
#include "actors/type_ids.hpp"
#include "daemon/compile_service.hpp" // compile_service
