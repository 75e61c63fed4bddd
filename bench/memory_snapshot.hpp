#pragma once

// The CUDA caching allocator's snapshot, with the C++ stack of each live
// block's allocation and the allocations and frees since recording began:
// what `torch.cuda.memory._snapshot()` gives Python, pickled the same way
// (scripts/memory_snapshot_diff.py reads two of them).

#include <string>

namespace gradd::measure {

/// Starts recording each CUDA allocation and free with its C++ stack,
/// forgetting what was recorded before. Throws where gradd-bench was built
/// without the CUDA toolkit.
void record_allocation_stacks();

/// Writes the allocator's snapshot, pickled, to `path`.
void write_memory_snapshot(const std::string& path);

} // namespace gradd::measure
