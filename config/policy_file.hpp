#pragma once

#include <cstddef>
#include <string>

namespace gradd::config {

/// The largest policy file read: a policy is a few dozen lines, so anything
/// bigger is the wrong file.
inline constexpr size_t max_policy_bytes = size_t{1} << 20;

/// The text of the policy file at `path`: a regular file (symbolic links
/// followed) of at most max_policy_bytes, UTF-8 without NUL or control
/// characters, indented with spaces. A leading UTF-8 byte order mark is
/// dropped. Never blocks on a FIFO or device: those are refused before they
/// are opened. Throws config_error naming the file and, for bad bytes, the line.
std::string read_policy_file(const std::string& path);

} // namespace gradd::config
