#pragma once

#include "gradd/settings.hpp"

#include <stdexcept>
#include <string>

namespace gradd {

/// A policy that cannot be used: names the file, the line (1-based, 0 if
/// none) and the key ("section.name", a section's name, or "" if none) at
/// fault. what() reads "gradd: FILE:LINE: key 'KEY': REASON".
class config_error : public std::runtime_error {
public:
  config_error(std::string file, int line, std::string key, std::string reason);
  const std::string& file() const noexcept { return file_; }
  int line() const noexcept { return line_; }
  const std::string& key() const noexcept { return key_; }
  /// what() without the file, line and key.
  const std::string& reason() const noexcept { return reason_; }

private:
  std::string file_;
  int line_;
  std::string key_;
  std::string reason_;
};

/// Reads the policy at `path`: keys left out keep their defaults, and the
/// result's `source` is `path`. Every problem is a config_error, raised at
/// the first one: a path that is not a regular file of at most 1 MiB, or
/// cannot be read; bytes that are not UTF-8 text; bad YAML; more than one
/// document; an unknown, duplicate or non-scalar section or key; anchors,
/// aliases, merge keys or tags; a bad value. Thread-safe.
settings load_settings(const std::string& path);

/// The policy from the file named by $GRADD_CONFIG, or the defaults if it is
/// unset or empty. A bad file's config_error says it came from GRADD_CONFIG.
settings default_settings();

} // namespace gradd
