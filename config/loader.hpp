#pragma once

#include "config/settings.hpp"

#include <stdexcept>
#include <string>

namespace gradd {

/// A policy file that cannot be used: names the file, the line (1-based, 0
/// if unknown) and the key at fault.
class config_error : public std::runtime_error {
public:
  config_error(std::string file, int line, std::string key, const std::string& what);
  const std::string& file() const noexcept { return file_; }
  int line() const noexcept { return line_; }
  const std::string& key() const noexcept { return key_; }

private:
  std::string file_;
  int line_;
  std::string key_;
};

/// Reads the policy at `path`: keys left out keep their defaults. Throws
/// config_error for a missing file, bad YAML, an unknown key or a bad value.
settings load_settings(const std::string& path);

/// The policy from the file named by $GRADD_CONFIG, or the defaults if it is
/// unset or empty.
settings default_settings();

} // namespace gradd
