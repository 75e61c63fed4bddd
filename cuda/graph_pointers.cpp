// The device pointers a captured CUDA graph's nodes hold (see
// graph_pointers.hpp).

#include "cuda/graph_pointers.hpp"

#include "cuda/driver_calls.hpp"

#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace gradd::cuda {

namespace {

/// Each argument's offset and size in a kernel's parameter buffer.
std::vector<std::pair<size_t, size_t>> argument_layout(const CUDA_KERNEL_NODE_PARAMS& kernel) {
  std::vector<std::pair<size_t, size_t>> layout;
  for (size_t i = 0;; ++i) {
    size_t offset = 0, size = 0;
    auto status = kernel.func ? driver().function_argument(kernel.func, i, &offset, &size)
                              : driver().kernel_argument(kernel.kern, i, &offset, &size);
    if (status != CUDA_SUCCESS)
      return layout;
    layout.emplace_back(offset, size);
  }
}

/// Moves a kernel node's arguments in `graph` and `exec`; whether any moved.
bool move_kernel(cudaGraphNode_t node, cudaGraphExec_t exec,
                 const std::vector<pointer_move>& moves) {
  kernel_arguments kernel;
  if (auto why = read_arguments(node, kernel); !why.empty())
    throw std::runtime_error(why);
  bool any = false;
  for (auto [offset, size] : kernel.layout)
    any = move_words(kernel.values.data(), offset, offset + size, moves) || any;
  if (!any)
    return false;
  const auto& calls = driver();
  if (auto status = calls.set_graph_node_arguments(node, &kernel.launch); status != CUDA_SUCCESS)
    throw std::runtime_error("the CUDA driver refused a kernel node's moved arguments (error "
                             + std::to_string(status) + ")");
  if (auto status = calls.set_node_arguments(exec, node, &kernel.launch); status != CUDA_SUCCESS)
    throw std::runtime_error("the CUDA driver refused an instantiated kernel node's moved "
                             "arguments (error " + std::to_string(status) + ")");
  return true;
}

} // namespace

std::vector<cudaGraphNode_t> nodes_of(cudaGraph_t graph) {
  size_t count = 0;
  C10_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  C10_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
  return nodes;
}

std::string read_arguments(cudaGraphNode_t node, kernel_arguments& into) {
  const auto& calls = driver();
  if (!calls.rebinds())
    return "the CUDA driver lacks cuFuncGetParamInfo (CUDA 12.4)";
  auto& launch = into.launch;
  if (calls.node_arguments(node, &launch) != CUDA_SUCCESS)
    return "a kernel node's arguments cannot be read";
  into.layout = argument_layout(launch);
  if (!into.layout.empty() && !launch.kernelParams)
    return "a kernel takes its arguments as one opaque buffer";
  size_t end = 0;
  for (auto [offset, size] : into.layout)
    end = std::max(end, offset + size);
  into.values.assign(end, 0);
  into.pointers.clear();
  for (size_t i = 0; i < into.layout.size(); ++i) {
    auto [offset, size] = into.layout[i];
    std::memcpy(into.values.data() + offset, launch.kernelParams[i], size);
    into.pointers.push_back(into.values.data() + offset);
  }
  launch.kernelParams = into.pointers.data();
  launch.extra = nullptr;
  return "";
}

bool points_into(cudaGraph_t graph, const std::vector<device_range>& ranges) {
  if (ranges.empty())
    return false;
  auto inside = [&](const void* pointer) {
    return std::any_of(ranges.begin(), ranges.end(),
                       [pointer](const device_range& r) { return r.holds(pointer); });
  };
  for (auto node : nodes_of(graph)) {
    cudaGraphNodeType type{};
    C10_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    switch (type) {
      case cudaGraphNodeTypeKernel: {
        kernel_arguments kernel;
        if (!read_arguments(node, kernel).empty())
          return true;
        for (auto [offset, size] : kernel.layout)
          for (size_t at = (offset + 3) / 4 * 4; at + 8 <= offset + size; at += 4) {
            const void* word = nullptr;
            std::memcpy(&word, kernel.values.data() + at, sizeof word);
            if (inside(word))
              return true;
          }
        break;
      }
      case cudaGraphNodeTypeMemcpy: {
        cudaMemcpy3DParms copy{};
        C10_CUDA_CHECK(cudaGraphMemcpyNodeGetParams(node, &copy));
        if (inside(copy.srcPtr.ptr) || inside(copy.dstPtr.ptr))
          return true;
        break;
      }
      case cudaGraphNodeTypeMemset: {
        cudaMemsetParams set{};
        C10_CUDA_CHECK(cudaGraphMemsetNodeGetParams(node, &set));
        if (inside(set.dst))
          return true;
        break;
      }
      case cudaGraphNodeTypeEmpty:
      case cudaGraphNodeTypeWaitEvent:
      case cudaGraphNodeTypeEventRecord:
        break;
      default:
        return true;
    }
  }
  return false;
}

const void* moved_pointer(const void* pointer, const std::vector<pointer_move>& moves) {
  for (const auto& m : moves)
    if (m.from.holds(pointer))
      return static_cast<const char*>(m.to)
             + (static_cast<const char*>(pointer) - static_cast<const char*>(m.from.begin));
  return pointer;
}

bool move_words(unsigned char* bytes, size_t begin, size_t end,
                const std::vector<pointer_move>& moves) {
  bool any = false;
  for (size_t at = (begin + 3) / 4 * 4; at + 8 <= end;) {
    const void* word = nullptr;
    std::memcpy(&word, bytes + at, sizeof word);
    const void* to = moved_pointer(word, moves);
    if (to == word) {
      at += 4;
      continue;
    }
    std::memcpy(bytes + at, &to, sizeof to);
    any = true;
    at += 8;
  }
  return any;
}

std::vector<cudaGraphNode_t> move_pointers(cudaGraph_t graph, cudaGraphExec_t exec,
                                           const std::vector<pointer_move>& moves) {
  std::vector<cudaGraphNode_t> done;
  for (auto node : nodes_of(graph)) {
    cudaGraphNodeType type{};
    C10_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    switch (type) {
      case cudaGraphNodeTypeKernel:
        if (move_kernel(node, exec, moves))
          done.push_back(node);
        break;
      case cudaGraphNodeTypeMemcpy: {
        cudaMemcpy3DParms copy{};
        C10_CUDA_CHECK(cudaGraphMemcpyNodeGetParams(node, &copy));
        auto* source = const_cast<void*>(moved_pointer(copy.srcPtr.ptr, moves));
        auto* destination = const_cast<void*>(moved_pointer(copy.dstPtr.ptr, moves));
        if (source == copy.srcPtr.ptr && destination == copy.dstPtr.ptr)
          break;
        copy.srcPtr.ptr = source;
        copy.dstPtr.ptr = destination;
        C10_CUDA_CHECK(cudaGraphMemcpyNodeSetParams(node, &copy));
        C10_CUDA_CHECK(cudaGraphExecMemcpyNodeSetParams(exec, node, &copy));
        done.push_back(node);
        break;
      }
      case cudaGraphNodeTypeMemset: {
        cudaMemsetParams set{};
        C10_CUDA_CHECK(cudaGraphMemsetNodeGetParams(node, &set));
        auto* destination = const_cast<void*>(moved_pointer(set.dst, moves));
        if (destination == set.dst)
          break;
        set.dst = destination;
        C10_CUDA_CHECK(cudaGraphMemsetNodeSetParams(node, &set));
        C10_CUDA_CHECK(cudaGraphExecMemsetNodeSetParams(exec, node, &set));
        done.push_back(node);
        break;
      }
      case cudaGraphNodeTypeEmpty:
      case cudaGraphNodeTypeWaitEvent:
      case cudaGraphNodeTypeEventRecord:
      case cudaGraphNodeTypeHost:
      case cudaGraphNodeTypeMemAlloc:
      case cudaGraphNodeTypeMemFree:
        break;
      default:
        throw std::runtime_error("the graph holds a node of kind "
                                 + std::to_string(static_cast<int>(type))
                                 + ", whose pointers cannot be read");
    }
  }
  return done;
}

} // namespace gradd::cuda
