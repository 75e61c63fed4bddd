#pragma once

// Graph passes over a functional recording, and the bookkeeping replay needs
// afterwards. Ops keep their ids through passes, so each still finds its
// payload; the values' last uses are recomputed for the new order.

#include "functional/recording.hpp"

#include <string>

namespace gradd::functional {

/// Recomputes `rec.last_use` from the ops as they are now ordered.
void refresh_last_uses(recording& rec);

/// Runs the pass pipeline `pipeline` (compiler/pass_manager.hpp) over the
/// recording's IR; a later replay runs the transformed program. Throws
/// std::invalid_argument, naming the pass and op, if a pass breaks the graph.
void run_passes(recording& rec, const std::string& pipeline);

} // namespace gradd::functional
