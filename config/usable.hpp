#pragma once

#include "gradd/settings.hpp"

namespace gradd {

/// Checks that what `s` asks of the machine can be done, for gradd::enable
/// to call before it serves a backward: today, that logging.ir_dump_dir and
/// cache.dir, where set, are directories gradd can write in, and that
/// $GRADD_DAEMON, where it names the daemon, is host:port. A missing directory is created,
/// with its parents (mkdir -p), as the IR dump would. Throws config_error
/// naming `s.source` ("<settings>" for settings made in code), line 0, and
/// the key.
void check_usable(const settings& s);

} // namespace gradd
