// The functional backwards bound in this process (see registry.hpp).
//
// A map from name to a binding under a reader-writer lock: binds
// are rare (once per node type), lookups happen on every captured call.

#include "functional/registry.hpp"

#include <shared_mutex>
#include <unordered_map>

namespace gradd::functional {

namespace {

using torch::autograd::functional_apply_t;

struct functional_table {
  std::shared_mutex mutex;
  std::unordered_map<std::string, functional_binding> functions;
};

functional_table& table() {
  static auto* instance = new functional_table;  // never destroyed: used at exit
  return *instance;
}

} // namespace

void bind_functional(const std::string& name, functional_apply_t fn, bool custom_function) {
  functional_binding binding{std::make_shared<const functional_apply_t>(std::move(fn)),
                             custom_function};
  auto& t = table();
  std::unique_lock lock(t.mutex);
  t.functions[name] = std::move(binding);
}

functional_binding bound_functional(const std::string& name) {
  auto& t = table();
  std::shared_lock lock(t.mutex);
  auto it = t.functions.find(name);
  return it == t.functions.end() ? functional_binding{} : it->second;
}

} // namespace gradd::functional
