#pragma once

// The caching allocator's expandable segments for the pools graphs are
// captured into (Note [Expandable pool segments], expandable_segments.cpp).

namespace gradd::cuda {

/// While one is alive, new segments of the caching allocator are
/// expandable, unless the process's own allocator settings chose (see the
/// Note). Any thread may hold one; the setting of before comes back when
/// the last goes.
class expandable_segments_scope {
public:
  expandable_segments_scope();
  ~expandable_segments_scope();
  expandable_segments_scope(const expandable_segments_scope&) = delete;
  expandable_segments_scope& operator=(const expandable_segments_scope&) = delete;

private:
  bool counted_ = false;
};

} // namespace gradd::cuda
