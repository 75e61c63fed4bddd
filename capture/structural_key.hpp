#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gradd::capture {

/// The structure of a backward as one word string: node types, edges,
/// hooks present, needed outputs, retain_graph. Equal keys mean one plan
/// serves both graphs (sizes and constants live in the nodes themselves).
struct structural_key {
  std::vector<uint64_t> words;
  uint64_t hash = 0;

  /// Recomputes `hash` from `words`.
  void seal() noexcept {
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ words.size();
    for (auto w : words) {
      h ^= w + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
      h *= 0xff51afd7ed558ccdULL;
    }
    hash = h;
  }

  friend bool operator==(const structural_key& a, const structural_key& b) noexcept {
    return a.hash == b.hash && a.words == b.words;
  }
};

struct structural_key_hash {
  size_t operator()(const structural_key& k) const noexcept { return k.hash; }
};

} // namespace gradd::capture
