#pragma once

// The daemon's token: a secret in a file only its user can read, that every
// client presents in its hello (docs/design.md, "The daemon"). Whoever can
// read the file may use the daemon; nobody else on the machine can.

#include "gradd/settings.hpp"

#include <string>

namespace gradd {

/// The token file of `s`: $GRADD_TOKEN_FILE (a launcher's), else
/// daemon.token_file, else /tmp/gradd-<uid>/token.
std::string token_file_path(const settings& s);

/// The token in the file at `path`. Throws std::runtime_error naming the
/// path and what is wrong: missing, not a regular file, readable or
/// writable by others than its owner, not owned by this user, or empty; or
/// in a folder (as written, or where a link leads) that another user owns
/// or may write to, who could swap the file.
std::string read_token(const std::string& path);

/// The token at `path`; where there is no file, creates it (and its folder,
/// mode 0700, if missing) with 32 random hex digits, mode 0600. Throws as
/// read_token, and creates nothing in a folder it refuses.
std::string read_or_create_token(const std::string& path);

} // namespace gradd
