#pragma once

// Note [Agreement across ranks], the daemon's side: the proposals of a job's
// ranks on this machine for one structure, answered with the largest of each
// rank's latest once all came, and on several machines the largest across
// them through the job's store (store_exchange.hpp). Handlers of the compile
// service (compile_service.hpp), on its state.

#include "daemon/compile_service.hpp"

namespace gradd::daemon {

/// A rank's proposal: answered once every rank of the job on this machine
/// proposed (and, on several machines, the store exchange came back).
caf::typed_response_promise<actors::agreed> on_agree(service_pointer self,
                                                    actors::agree_request& request);

/// The store exchange of one round came back: settles its agreement, or
/// tells its ranks there is none.
void on_machines_agreed(service_pointer self, machines_agreed& result);

} // namespace gradd::daemon
