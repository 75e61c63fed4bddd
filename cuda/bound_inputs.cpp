// Finding and rewriting the pointers a CUDA graph holds into its inputs'
// static buffers (see bound_inputs.hpp).
//
// A kernel node's arguments are bytes whose layout only the kernel knows; the
// driver tells each argument's offset and size (cuFuncGetParamInfo), and a
// pointer lies 8-byte aligned inside one (alone, or in a struct passed by
// value such as TensorIterator's pointer arrays or cuBLAS's parameter
// blocks). A word that falls inside a static buffer is taken for a pointer
// into it: device addresses are not values an index or size takes. What a
// graph reads some other way (a pointer table in device memory) is not seen
// here, which is why backward_graph checks a binding by a replay with the
// static buffers poisoned before it keeps it.

#include "cuda/bound_inputs.hpp"

#include <c10/cuda/CUDAException.h>
#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <type_traits>

namespace gradd::cuda {

namespace {

/// The driver calls gradd needs that the runtime does not offer, from the
/// driver libtorch already loaded.
struct driver_calls {
  PFN_cuGraphKernelNodeGetParams_v12000 node_arguments = nullptr;
  PFN_cuGraphExecKernelNodeSetParams_v12000 set_node_arguments = nullptr;
  PFN_cuFuncGetParamInfo_v12040 function_argument = nullptr;
  PFN_cuKernelGetParamInfo_v12040 kernel_argument = nullptr;

  bool complete() const noexcept {
    return node_arguments && set_node_arguments && function_argument && kernel_argument;
  }
};

const driver_calls& driver() {
  static const driver_calls calls = [] {
    driver_calls c;
    auto load = [](const char* name, auto& call, unsigned version) {
      void* address = nullptr;
      cudaDriverEntryPointQueryResult status{};
      if (cudaGetDriverEntryPointByVersion(name, &address, version, cudaEnableDefault, &status)
              == cudaSuccess
          && status == cudaDriverEntryPointSuccess)
        call = reinterpret_cast<std::remove_reference_t<decltype(call)>>(address);
      else
        (void)cudaGetLastError();
    };
    load("cuGraphKernelNodeGetParams", c.node_arguments, 12000);
    load("cuGraphExecKernelNodeSetParams", c.set_node_arguments, 12000);
    load("cuFuncGetParamInfo", c.function_argument, 12040);
    load("cuKernelGetParamInfo", c.kernel_argument, 12040);
    return c;
  }();
  return calls;
}

/// Static buffers sorted by address, to find the one a word points into.
class buffer_index {
public:
  explicit buffer_index(const std::vector<byte_range>& buffers) {
    for (size_t i = 0; i < buffers.size(); ++i)
      if (buffers[i].bytes)
        sorted_.push_back({reinterpret_cast<uintptr_t>(buffers[i].base), buffers[i].bytes,
                           static_cast<uint32_t>(i)});
    std::sort(sorted_.begin(), sorted_.end(),
              [](const entry& a, const entry& b) { return a.base < b.base; });
  }

  /// The input whose buffer holds `address`, and the offset there.
  std::optional<std::pair<uint32_t, uintptr_t>> find(uintptr_t address) const {
    auto it = std::upper_bound(sorted_.begin(), sorted_.end(), address,
                               [](uintptr_t a, const entry& e) { return a < e.base; });
    if (it == sorted_.begin())
      return std::nullopt;
    --it;
    if (address - it->base >= it->bytes)
      return std::nullopt;
    return std::pair{it->input, address - it->base};
  }

private:
  struct entry {
    uintptr_t base;
    size_t bytes;
    uint32_t input;
  };
  std::vector<entry> sorted_;
};

/// One pointer into an input: where it lies in the node's arguments, and
/// its offset from the input's first byte.
struct pointer_slot {
  size_t at = 0;
  uint32_t input = 0;
  uintptr_t offset = 0;
};

} // namespace

struct bound_inputs::node_arguments {
  cudaGraphNode_t node = nullptr;
  bool is_copy = false;
  CUDA_KERNEL_NODE_PARAMS kernel{};   ///< a kernel node: its launch, arguments in `values`
  std::vector<unsigned char> values;  ///< every argument's bytes at its device offset
  std::vector<void*> arguments;       ///< kernel.kernelParams: into values
  cudaMemcpy3DParms copy{};           ///< a memcpy node: its copy
  std::vector<pointer_slot> slots;

  /// Hands the node's arguments to `exec`; the error code, 0 if taken.
  int set_in(cudaGraphExec_t exec) const {
    if (is_copy)
      return static_cast<int>(cudaGraphExecMemcpyNodeSetParams(exec, node, &copy));
    return static_cast<int>(driver().set_node_arguments(exec, node, &kernel));
  }
};

bound_inputs::bound_inputs() = default;
bound_inputs::~bound_inputs() = default;
bound_inputs::bound_inputs(bound_inputs&&) noexcept = default;
bound_inputs& bound_inputs::operator=(bound_inputs&&) noexcept = default;

bound_inputs bound_inputs::find(cudaGraph_t graph, const std::vector<byte_range>& buffers) {
  bound_inputs found;
  found.kept_.assign(buffers.size(), false);
  auto refuse = [&found](std::string why) {
    found.nodes_.clear();
    std::fill(found.kept_.begin(), found.kept_.end(), false);
    found.why_not_ = std::move(why);
    return std::move(found);
  };
  const auto& calls = driver();
  if (!calls.complete())
    return refuse("the CUDA driver lacks cuFuncGetParamInfo (CUDA 12.4)");

  buffer_index index(buffers);
  std::vector<bool> written(buffers.size(), false);
  size_t count = 0;
  C10_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  C10_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));

  for (auto node : nodes) {
    cudaGraphNodeType type{};
    C10_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    auto arguments = std::make_unique<node_arguments>();
    arguments->node = node;
    switch (type) {
      case cudaGraphNodeTypeKernel: {
        auto& kernel = arguments->kernel;
        if (calls.node_arguments(node, &kernel) != CUDA_SUCCESS)
          return refuse("a kernel node's arguments cannot be read");
        std::vector<std::pair<size_t, size_t>> layout;  // offset, size of each argument
        for (size_t i = 0;; ++i) {
          size_t offset = 0, size = 0;
          auto status = kernel.func ? calls.function_argument(kernel.func, i, &offset, &size)
                                    : calls.kernel_argument(kernel.kern, i, &offset, &size);
          if (status != CUDA_SUCCESS)
            break;
          layout.emplace_back(offset, size);
        }
        if (!layout.empty() && !kernel.kernelParams)
          return refuse("a kernel takes its arguments as one opaque buffer");
        size_t end = 0;
        for (auto [offset, size] : layout)
          end = std::max(end, offset + size);
        arguments->values.resize(end);
        for (size_t i = 0; i < layout.size(); ++i) {
          auto [offset, size] = layout[i];
          std::memcpy(arguments->values.data() + offset, kernel.kernelParams[i], size);
          for (size_t at = (offset + 7) / 8 * 8; at + 8 <= offset + size; at += 8) {
            uintptr_t word = 0;
            std::memcpy(&word, arguments->values.data() + at, sizeof word);
            if (auto hit = index.find(word))
              arguments->slots.push_back({at, hit->first, hit->second});
          }
        }
        for (auto [offset, size] : layout)
          arguments->arguments.push_back(arguments->values.data() + offset);
        kernel.kernelParams = arguments->arguments.data();
        kernel.extra = nullptr;
        break;
      }
      case cudaGraphNodeTypeMemcpy: {
        auto& copy = arguments->copy;
        C10_CUDA_CHECK(cudaGraphMemcpyNodeGetParams(node, &copy));
        arguments->is_copy = true;
        if (auto hit = index.find(reinterpret_cast<uintptr_t>(copy.dstPtr.ptr)))
          written[hit->first] = true;
        if (auto hit = index.find(reinterpret_cast<uintptr_t>(copy.srcPtr.ptr)))
          arguments->slots.push_back({0, hit->first, hit->second});
        break;
      }
      case cudaGraphNodeTypeMemset: {
        cudaMemsetParams set{};
        C10_CUDA_CHECK(cudaGraphMemsetNodeGetParams(node, &set));
        if (auto hit = index.find(reinterpret_cast<uintptr_t>(set.dst)))
          written[hit->first] = true;
        break;
      }
      case cudaGraphNodeTypeEmpty:
      case cudaGraphNodeTypeWaitEvent:
      case cudaGraphNodeTypeEventRecord:
      case cudaGraphNodeTypeMemAlloc:
      case cudaGraphNodeTypeMemFree:
        break;
      default:
        return refuse("the graph holds a node of kind " + std::to_string(static_cast<int>(type)));
    }
    if (!arguments->slots.empty())
      found.nodes_.push_back(std::move(arguments));
  }

  std::vector<bool> keep(buffers.size(), false);
  for (size_t i = 0; i < buffers.size(); ++i)
    keep[i] = buffers[i].bytes && !written[i];
  found.keep_only(keep);
  return found;
}

bool bound_inputs::bindable(size_t input) const {
  return input < kept_.size() && kept_[input];
}

void bound_inputs::keep_only(const std::vector<bool>& keep) {
  for (size_t i = 0; i < kept_.size(); ++i)
    kept_[i] = i < keep.size() && keep[i];
  std::vector<std::unique_ptr<node_arguments>> needed;
  for (auto& node : nodes_) {
    auto& slots = node->slots;
    slots.erase(std::remove_if(slots.begin(), slots.end(),
                               [this](const pointer_slot& s) { return !kept_[s.input]; }),
                slots.end());
    if (!slots.empty())
      needed.push_back(std::move(node));
  }
  nodes_ = std::move(needed);
}

bool bound_inputs::empty() const noexcept {
  return std::none_of(kept_.begin(), kept_.end(), [](bool k) { return k; });
}

const std::string& bound_inputs::why_not() const noexcept {
  return why_not_;
}

void bound_inputs::keep_settable(cudaGraphExec_t exec) {
  std::vector<bool> keep = kept_;
  for (const auto& node : nodes_) {
    if (node->set_in(exec) == 0)
      continue;
    (void)cudaGetLastError();
    for (const auto& slot : node->slots)
      keep[slot.input] = false;
  }
  keep_only(keep);
}

std::optional<size_t> bound_inputs::bind(cudaGraphExec_t exec,
                                         const std::vector<const void*>& sources) {
  // A training loop's allocator tends to hand each step's activations the
  // addresses of the step before: a node whose inputs did not move keeps
  // the arguments it has.
  bound_to_.resize(sources.size(), nullptr);
  size_t rewritten = 0;
  for (auto& node : nodes_) {
    bool moved = false;
    for (const auto& slot : node->slots)
      moved = moved || sources[slot.input] != bound_to_[slot.input];
    if (!moved)
      continue;
    for (const auto& slot : node->slots) {
      uintptr_t address = reinterpret_cast<uintptr_t>(sources[slot.input]) + slot.offset;
      if (node->is_copy)
        node->copy.srcPtr.ptr = reinterpret_cast<void*>(address);
      else
        std::memcpy(node->values.data() + slot.at, &address, sizeof address);
    }
    if (int status = node->set_in(exec); status != 0) {
      (void)cudaGetLastError();
      std::fill(bound_to_.begin(), bound_to_.end(), nullptr);
      refusal_ = std::string(node->is_copy ? "a memcpy node" : "a kernel node") + " (error "
                 + std::to_string(status) + ")";
      return std::nullopt;
    }
    ++rewritten;
  }
  bound_to_ = sources;
  return rewritten;
}

} // namespace gradd::cuda
