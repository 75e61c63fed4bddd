// Loading a YAML policy against the schema.
//
// The document must be a map of sections, each a map of keys; anything else,
// and any key the schema does not list, is an error naming file, line and
// key, raised before gradd serves a single backward.

#include "config/loader.hpp"

#include "config/schema.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

namespace gradd {

config_error::config_error(std::string file, int line, std::string key, const std::string& what)
    : std::runtime_error("gradd: " + file + ":" + std::to_string(line) + ": "
                         + (key.empty() ? "" : "key '" + key + "': ") + what),
      file_(std::move(file)), line_(line), key_(std::move(key)) {}

namespace {

int line_of(const YAML::Node& node) {
  return node.Mark().line + 1;
}

/// The section names (for `section` empty) or the key names of `section`.
std::string known_names(const std::string& section) {
  std::vector<std::string> names;
  for (const auto& k : config::schema()) {
    if (!section.empty() && k.section != section)
      continue;
    const auto& name = section.empty() ? k.section : k.name;
    if (std::find(names.begin(), names.end(), name) == names.end())
      names.push_back(name);
  }
  std::string joined;
  for (const auto& n : names)
    joined += (joined.empty() ? "" : ", ") + n;
  return joined;
}

} // namespace

settings load_settings(const std::string& path) {
  if (!std::ifstream(path).good())
    throw config_error(path, 0, "", "cannot open the file");
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw config_error(path, e.mark.line + 1, "", "not valid YAML: " + e.msg);
  }
  settings result;
  if (root.IsNull())
    return result;  // an empty file: all defaults
  if (!root.IsMap())
    throw config_error(path, line_of(root), "", "expected a map of sections");
  for (const auto& section : root) {
    auto section_name = section.first.as<std::string>();
    bool known_section = false;
    for (const auto& k : config::schema())
      known_section = known_section || k.section == section_name;
    if (!known_section)
      throw config_error(path, line_of(section.first), section_name,
                         "unknown section (known: " + known_names("") + ")");
    if (!section.second.IsMap())
      throw config_error(path, line_of(section.second), section_name,
                         "expected a map of keys");
    for (const auto& entry : section.second) {
      auto key = section_name + "." + entry.first.as<std::string>();
      const config::key_spec* spec = nullptr;
      for (const auto& k : config::schema())
        if (k.path() == key)
          spec = &k;
      if (spec == nullptr)
        throw config_error(path, line_of(entry.first), key,
                           "unknown key (known in " + section_name + ": "
                               + known_names(section_name) + ")");
      auto problem = spec->apply(result, entry.second);
      if (!problem.empty())
        throw config_error(path, line_of(entry.second), key, problem);
    }
  }
  return result;
}

settings default_settings() {
  const char* path = std::getenv("GRADD_CONFIG");
  return path != nullptr && *path != '\0' ? load_settings(path) : settings{};
}

} // namespace gradd
