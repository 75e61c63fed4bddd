#pragma once

// The policy schema: one table of keys, each with its type, default and
// one-line doc. It drives the loader, the README's table and the commented
// example (config/gradd.example.yaml), which the tests hold to it.

#include "gradd/settings.hpp"

#include <functional>
#include <string>
#include <vector>

namespace gradd::config {

/// One key of the policy file.
struct key_spec {
  std::string section;        ///< e.g. "compile"
  std::string name;           ///< e.g. "mode"
  std::string type;           ///< e.g. "async, sync", "integer >= 1"
  std::string default_value;  ///< as written in YAML
  std::string doc;
  /// Parses the scalar `value` into `s`; returns an error message, empty if
  /// fine. (The loader refuses values that are not scalars.)
  std::function<std::string(settings& s, const std::string& value)> apply;

  std::string path() const { return section + "." + name; }
};

/// Every key, in documentation order.
const std::vector<key_spec>& schema();

/// `text` as an error message shows a value from a policy: in quotes, with
/// line breaks and quotes escaped, cut after 60 bytes.
std::string quoted(const std::string& text);

} // namespace gradd::config
