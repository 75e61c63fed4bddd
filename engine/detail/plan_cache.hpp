#pragma once

#include "compiler/ir.hpp"
#include "compiler/plan.hpp"
#include "engine/gradd.hpp"
#include "engine/detail/structural_key.hpp"

#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

namespace gradd::engine::detail {

/// What gradd made of one captured structure: a plan, or the verdict that
/// the stock engine must serve it.
struct compiled_graph {
  compiler::graph ir;
  compiler::plan plan;
  std::optional<fallback_reason> eager_reason;
};

/// Compiled graphs by structural key, several variants per key (the same
/// structure recorded with another sequence-number order). Read-mostly: a
/// hit takes a shared lock for one hash lookup; inserts are rare.
class plan_cache {
public:
  using entry = std::shared_ptr<const compiled_graph>;

  /// Returns the first variant under `key` that `accept` takes, or nullptr.
  template <class Accept>
  entry find(const structural_key& key, Accept&& accept) const {
    std::shared_lock lock(mutex_);
    auto found = map_.find(key);
    if (found == map_.end())
      return nullptr;
    for (const auto& variant : found->second)
      if (accept(*variant))
        return variant;
    return nullptr;
  }

  /// Adds a variant under `key`.
  void insert(const structural_key& key, entry variant) {
    std::unique_lock lock(mutex_);
    map_[key].push_back(std::move(variant));
  }

  /// Drops every entry; holders of an entry keep it alive.
  void clear() {
    std::unique_lock lock(mutex_);
    map_.clear();
  }

  /// Number of variants cached.
  size_t size() const {
    std::shared_lock lock(mutex_);
    size_t n = 0;
    for (const auto& [key, variants] : map_)
      n += variants.size();
    return n;
  }

private:
  mutable std::shared_mutex mutex_;
  std::unordered_map<structural_key, std::vector<entry>, structural_key_hash> map_;
};

} // namespace gradd::engine::detail
