#pragma once

// The device pointers a captured CUDA graph's nodes hold: where a node
// points, and moving what points into one range to another. A kernel node's
// pointers are words of its arguments, 4- or 8-byte aligned inside one
// (alone, or in a struct passed by value such as cuBLAS's parameter
// blocks); the driver tells each argument's offset and size
// (cuFuncGetParamInfo).

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace gradd::cuda {

/// A range of device memory.
struct device_range {
  const void* begin = nullptr;
  size_t bytes = 0;

  bool holds(const void* pointer) const noexcept {
    return reinterpret_cast<uintptr_t>(pointer) - reinterpret_cast<uintptr_t>(begin) < bytes;
  }
};

/// Every pointer into `from` pointed at the same offset from `to`.
struct pointer_move {
  device_range from;
  const void* to = nullptr;
};

/// The nodes of `graph` as the driver lists them: in the order they were
/// captured.
std::vector<cudaGraphNode_t> nodes_of(cudaGraph_t graph);

/// A kernel node's launch with a copy of its arguments, each at its offset
/// in `values`, where words can be read and rewritten; `launch` hands them
/// back to the driver. Move-only: `launch` points into the copy.
struct kernel_arguments {
  CUDA_KERNEL_NODE_PARAMS launch{};
  std::vector<std::pair<size_t, size_t>> layout;  ///< each argument's offset and size
  std::vector<unsigned char> values;
  std::vector<void*> pointers;  ///< launch.kernelParams: into values

  kernel_arguments() = default;
  kernel_arguments(kernel_arguments&&) noexcept = default;
  kernel_arguments& operator=(kernel_arguments&&) noexcept = default;
  kernel_arguments(const kernel_arguments&) = delete;
  kernel_arguments& operator=(const kernel_arguments&) = delete;
};

/// Reads kernel node `node` into `into`; why it cannot be read (the driver
/// lacks cuFuncGetParamInfo or refuses, or the kernel takes its arguments
/// as one opaque buffer), "" where read.
std::string read_arguments(cudaGraphNode_t node, kernel_arguments& into);

/// Whether a node of `graph` holds a pointer into one of `ranges`: a word
/// of a kernel's arguments, a memcpy's or memset's address. True where a
/// node cannot be read.
bool points_into(cudaGraph_t graph, const std::vector<device_range>& ranges);

/// Where `pointer` goes under `moves`: itself where no range holds it.
const void* moved_pointer(const void* pointer, const std::vector<pointer_move>& moves);

/// Moves the words of `bytes[begin, end)` (a kernel argument's) that point
/// into a move's range; whether any moved.
bool move_words(unsigned char* bytes, size_t begin, size_t end,
                const std::vector<pointer_move>& moves);

/// Applies `moves` to every node of `graph` that points into one of their
/// ranges, and to the node in `exec`, instantiated from `graph`, with the
/// node's other arguments as `graph` has them. Returns the nodes moved.
/// Throws std::runtime_error where a node cannot be read or the driver
/// refuses its new arguments; `graph` and `exec` may then point partly
/// where they did and must not be launched.
std::vector<cudaGraphNode_t> move_pointers(cudaGraph_t graph, cudaGraphExec_t exec,
                                           const std::vector<pointer_move>& moves);

} // namespace gradd::cuda
