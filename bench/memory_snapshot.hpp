#pragma once

// The CUDA caching allocator's snapshot, with the C++ stack of each live
// block's allocation: what `torch.cuda.memory._snapshot()` gives Python,
// pickled the same way (scripts/memory_snapshot_diff.py reads two of them).

#include <string>

namespace gradd::measure {

/// Starts recording each CUDA allocation's C++ stack, for every later
/// allocation of the process. Throws where gradd-bench was built without
/// the CUDA toolkit.
void record_allocation_stacks();

/// Writes the allocator's snapshot, pickled, to `path`.
void write_memory_snapshot(const std::string& path);

} // namespace gradd::measure
