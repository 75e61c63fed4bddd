// Expandable segments around captures (see expandable_segments.hpp).
//
// Note [Expandable pool segments]
// The caching allocator cuts a private pool as it cuts the default one:
// into segments of its own rounding, each one cudaMalloc, no block across
// two. A graph's pool then held far more than its working set (resnet18
// at batch 32: 755 MB for a backward that needs 284). With expandable
// segments a pool's memory is one range of addresses, mapped page by page
// as it grows, and the same pool held 340 MB at the same speed. So gradd
// turns expandable segments on for the time of its captures, the only time
// a graph's pool grows, and back off after. A process whose allocator
// settings (PYTORCH_CUDA_ALLOC_CONF, PYTORCH_ALLOC_CONF, or set at run
// time) name expandable_segments or a backend when gradd first captures
// keeps its choice, for the pools too. The setting is the process's: a
// segment another thread's allocation creates during a capture is
// expandable as well, which the allocator handles as any other.

#include "cuda/expandable_segments.hpp"

#include <c10/core/AllocatorConfig.h>

#include <mutex>
#include <optional>
#include <string>

namespace gradd::cuda {

namespace {

/// The process's setting, as the scopes turn it on and off.
class segments_toggle {
public:
  /// Turns expandable segments on for one more scope; false, doing
  /// nothing, where the process chose its setting.
  bool enter() {
    std::lock_guard lock(mutex_);
    if (!settings_) {
      auto found = c10::CachingAllocator::getAllocatorSettings();
      open_ = found.find("expandable_segments") == std::string::npos
           && found.find("backend") == std::string::npos;
      settings_ = std::move(found);
    }
    if (!open_)
      return false;
    if (scopes_++ == 0)
      set(true);
    return true;
  }

  /// Ends a scope enter() counted; the last turns them off again.
  void leave() {
    std::lock_guard lock(mutex_);
    if (--scopes_ == 0)
      set(false);
  }

private:
  /// The settings found at the first scope, `expandable_segments` added.
  void set(bool on) {
    std::string item = on ? "expandable_segments:True" : "expandable_segments:False";
    c10::CachingAllocator::setAllocatorSettings(settings_->empty() ? item : *settings_ + "," + item);
  }

  std::mutex mutex_;
  std::optional<std::string> settings_;  ///< as found at the first scope
  bool open_ = false;                    ///< the process left the choice to gradd
  int scopes_ = 0;
};

segments_toggle& toggle() {
  static segments_toggle t;
  return t;
}

} // namespace

expandable_segments_scope::expandable_segments_scope() : counted_(toggle().enter()) {}

expandable_segments_scope::~expandable_segments_scope() {
  if (counted_)
    toggle().leave();
}

} // namespace gradd::cuda
