// Loading a YAML policy against the schema.
//
// A policy is one YAML document: a map of sections, each a map of keys with
// plain scalar values. The file's bytes are checked first
// (config/policy_file.cpp); then yaml-cpp's event parser hands over the
// document node by node, each with its line, and the reader below stops at
// the first node that breaks the shape, naming its line and key. Events, not
// yaml-cpp's node tree, because the tree hides what a policy must refuse: it
// keeps the last of two equal keys silently, LoadFile reads only the first
// document, and anchors, aliases, merge keys and tags change values in ways
// a reader of the file cannot see. Stopping at the first node out of shape
// also bounds how deep the parser goes.

#include "gradd/policy.hpp"

#include "config/policy_file.hpp"
#include "config/schema.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>

namespace gradd {

namespace {

std::string describe(const std::string& file, int line, const std::string& key,
                     const std::string& reason) {
  std::string text = "gradd: ";
  if (!file.empty()) {
    text += file;
    if (line > 0)
      text.append(":").append(std::to_string(line));
    text += ": ";
  }
  if (!key.empty())
    text.append("key '").append(key).append("': ");
  return text + reason;
}

} // namespace

config_error::config_error(std::string file, int line, std::string key, std::string reason)
    : std::runtime_error(describe(file, line, key, reason)), file_(std::move(file)), line_(line),
      key_(std::move(key)), reason_(std::move(reason)) {}

namespace {

using config::quoted;

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

/// A tag as the file wrote it: yaml-cpp expands "!!str" to the long form.
std::string written_tag(const std::string& tag) {
  const std::string core = "tag:yaml.org,2002:";
  return tag.rfind(core, 0) == 0 ? "!!" + tag.substr(core.size()) : tag;
}

/// Applies one policy document's events to a settings value; throws
/// config_error at the first event out of shape.
class policy_reader final : public YAML::EventHandler {
public:
  explicit policy_reader(std::string path) : path_(std::move(path)) {}

  const settings& result() const noexcept { return result_; }

  void OnDocumentStart(const YAML::Mark& mark) override {
    if (documents_++ > 0)
      fail(mark, "", "a second YAML document starts here; a policy is one document");
  }

  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override {
    switch (at_) {
      case position::document:  // an empty file, or only comments: all defaults
        at_ = position::done;
        return;
      case position::section_body:  // every key commented out
        at_ = position::section_name;
        return;
      case position::key_value:  // yaml-cpp marks an empty value where the next token is
        fail(key_mark_, key_, "has no value; expected " + spec_->type);
      default:
        fail(mark, owner(), "a key without a name");
    }
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override {
    fail(mark, owner(), "an alias (*name): a policy writes every value out");
  }

  void OnAnchor(const YAML::Mark& mark, const std::string& name) override {
    fail(mark, owner(), "an anchor (&" + name + "): a policy writes every value out");
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t,
                const std::string& value) override {
    check_tag(mark, tag);
    switch (at_) {
      case position::section_name:
        open_section(mark, value);
        return;
      case position::key_name:
        open_key(mark, value);
        return;
      case position::key_value: {
        auto problem = spec_->apply(result_, value);
        if (!problem.empty())
          fail(mark, key_, problem);
        at_ = position::key_name;
        return;
      }
      default:
        refuse_kind(mark, "the scalar " + quoted(value));
    }
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    check_tag(mark, tag);
    refuse_kind(mark, "a sequence");
  }

  void OnSequenceEnd() override {}  // never reached: a sequence start throws

  void OnMapStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    check_tag(mark, tag);
    if (at_ == position::document)
      at_ = position::section_name;
    else if (at_ == position::section_body)
      at_ = position::key_name;
    else
      refuse_kind(mark, "a map");
  }

  void OnMapEnd() override {
    at_ = at_ == position::key_name ? position::section_name : position::done;
  }

private:
  /// Where in the document the next event lands.
  enum class position { document, section_name, section_body, key_name, key_value, done };

  [[noreturn]] void fail(const YAML::Mark& mark, const std::string& key,
                         const std::string& reason) const {
    throw config_error(path_, mark.line + 1, key, reason);
  }

  /// The section or key the next node belongs to, for messages.
  std::string owner() const {
    switch (at_) {
      case position::key_value:
        return key_;
      case position::section_body:
      case position::key_name:
        return section_;
      default:
        return "";
    }
  }

  /// A node of the wrong kind (`what`) at the current position.
  [[noreturn]] void refuse_kind(const YAML::Mark& mark, const std::string& what) const {
    switch (at_) {
      case position::document:
        fail(mark, "", "a policy is a map of sections, got " + what);
      case position::section_body:
        fail(mark, section_, "expected a map of keys, got " + what);
      case position::key_value:
        fail(mark, key_, "expected a plain value (" + spec_->type + "), got " + what);
      default:
        fail(mark, owner(), "a key must be a plain name, got " + what);
    }
  }

  /// Plain ("?") and quoted ("!") nodes only: an explicit tag would make
  /// the reader of the file guess what the value becomes.
  void check_tag(const YAML::Mark& mark, const std::string& tag) const {
    if (tag != "?" && tag != "!" && !tag.empty())
      fail(mark, owner(), "the tag " + written_tag(tag) + ": a policy writes plain values");
  }

  /// Refuses `name` if the map being read already had it; else records it.
  void check_unique(std::map<std::string, int>& seen, const YAML::Mark& mark,
                    const std::string& name, const std::string& key) const {
    auto [first, fresh] = seen.emplace(name, mark.line + 1);
    if (!fresh)
      fail(mark, key, "given twice, at lines " + std::to_string(first->second) + " and "
                          + std::to_string(mark.line + 1) + "; keep one");
  }

  void open_section(const YAML::Mark& mark, const std::string& name) {
    if (name == "<<")
      fail(mark, "", "a merge key (<<): a policy writes every section out");
    bool known = std::any_of(config::schema().begin(), config::schema().end(),
                             [&](const config::key_spec& k) { return k.section == name; });
    if (!known)
      fail(mark, name, "unknown section (known: " + known_names("") + ")");
    check_unique(sections_, mark, name, name);
    section_ = name;
    keys_.clear();
    at_ = position::section_body;
  }

  void open_key(const YAML::Mark& mark, const std::string& name) {
    auto key = section_ + "." + name;
    if (name == "<<")
      fail(mark, section_, "a merge key (<<): a policy writes every key out");
    auto found = std::find_if(config::schema().begin(), config::schema().end(),
                              [&](const config::key_spec& k) { return k.path() == key; });
    if (found == config::schema().end())
      fail(mark, key, "unknown key (known in " + section_ + ": " + known_names(section_) + ")");
    check_unique(keys_, mark, name, key);
    spec_ = &*found;
    key_ = key;
    key_mark_ = mark;
    at_ = position::key_value;
  }

  std::string path_;
  settings result_;
  position at_ = position::document;
  int documents_ = 0;
  std::map<std::string, int> sections_;  ///< section name -> line, to refuse duplicates
  std::map<std::string, int> keys_;      ///< key name -> line, in the current section
  std::string section_;
  std::string key_;
  YAML::Mark key_mark_;
  const config::key_spec* spec_ = nullptr;
};

} // namespace

settings load_settings(const std::string& path) {
  policy_reader reader(path);
  try {
    std::istringstream text(config::read_policy_file(path));
    YAML::Parser parser(text);
    while (parser.HandleNextDocument(reader)) {
    }
  } catch (const config_error&) {
    throw;
  } catch (const YAML::Exception& e) {
    auto where = "not valid YAML (column " + std::to_string(e.mark.column + 1) + "): ";
    throw config_error(path, e.mark.line + 1, "", where + e.msg);
  } catch (const std::exception& e) {
    throw config_error(path, 0, "", std::string("cannot read the policy: ") + e.what());
  }
  auto result = reader.result();
  result.source = path;
  return result;
}

settings default_settings() {
  const char* path = std::getenv("GRADD_CONFIG");
  if (path == nullptr || *path == '\0')
    return settings{};
  try {
    return load_settings(path);
  } catch (const config_error& e) {
    throw config_error(e.file(), e.line(), e.key(),
                       e.reason() + " (the policy GRADD_CONFIG names)");
  }
}

} // namespace gradd
