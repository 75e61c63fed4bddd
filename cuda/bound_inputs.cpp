// Finding and rewriting the pointers a CUDA graph holds derived from its
// inputs' static buffers (see bound_inputs.hpp).
//
// A kernel node's arguments are bytes whose layout only the kernel knows; the
// driver tells each argument's offset and size (cuFuncGetParamInfo), and a
// pointer lies 4- or 8-byte aligned inside one (alone, or in a struct passed
// by value such as TensorIterator's pointer arrays or cuBLAS's parameter
// blocks). Which words are pointers, and to which input, shows by comparing
// the graph with its twin: a word that moved by exactly the distance input
// i's buffer moved, and points no further from that buffer than its own
// length, is derived from input i, wherever it points. Words that did not
// move are no pointers to a candidate; words that moved otherwise point into
// the capture's own pool. Each candidate's twin buffer lies an odd multiple
// of 256 bytes into its allocation, so its move cannot equal that of a pool
// allocation (a multiple of 512 bytes); two candidates that moved alike are
// not bound.
//
// Both conditions came from a Hopper GPU. Reading where words point instead
// (the first version) faulted in ~1 of 4 captures of resnet18 with an
// illegal memory access in a trial replay, and not at all (20 runs of 20)
// once every static buffer had 2 MiB of unused memory around it: a word
// pointing outside its own buffer (as a base moved back by a padding
// would) was taken for a pointer into the buffer the allocator had placed
// beside it. The length bound keeps out a word of a cuDNN kernel whose low
// half is a pointer's low half and whose high half is something else: it
// moves as the pointer does wherever the move is below 4 GiB, and
// rewriting it as a pointer changed its high half and the gradients.
//
// What a graph reads some other way (a pointer table in device memory) is
// not seen here, which is why backward_graph checks a binding by a replay
// with the static buffers poisoned before it keeps it.

#include "cuda/bound_inputs.hpp"

#include "cuda/driver_calls.hpp"
#include "cuda/graph_pointers.hpp"

#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <unordered_map>

namespace gradd::cuda {

namespace {

/// The inputs by how far their buffer moved from the graph to its twin.
class shift_index {
public:
  explicit shift_index(const std::vector<twin_buffers>& buffers) {
    std::unordered_map<uintptr_t, size_t> count;
    for (const auto& b : buffers)
      if (b.in_graph)
        ++count[shift_of(b)];
    for (size_t i = 0; i < buffers.size(); ++i)
      if (buffers[i].in_graph && count[shift_of(buffers[i])] == 1)
        inputs_.emplace(shift_of(buffers[i]), static_cast<uint32_t>(i));
  }

  /// The input whose buffer moved by `shift`, if exactly one did.
  std::optional<uint32_t> find(uintptr_t shift) const {
    auto it = inputs_.find(shift);
    if (it == inputs_.end())
      return std::nullopt;
    return it->second;
  }

  /// How far a candidate's buffer moved from the graph to its twin.
  static uintptr_t shift_of(const twin_buffers& b) {
    return reinterpret_cast<uintptr_t>(b.in_twin) - reinterpret_cast<uintptr_t>(b.in_graph);
  }

private:
  std::unordered_map<uintptr_t, uint32_t> inputs_;
};

/// One pointer derived from an input: where it lies in the node's
/// arguments, and its offset from the input's first byte (modulo 2^64: it
/// may point before it).
struct pointer_slot {
  size_t at = 0;
  uint32_t input = 0;
  uintptr_t offset = 0;
};

constexpr auto shared_memory_limit_attribute = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;

/// The most dynamic shared memory a kernel node's kernel allows a launch
/// now; -1 where the driver does not say.
int shared_memory_limit(const CUDA_KERNEL_NODE_PARAMS& kernel) {
  int limit = -1;
  int device = 0;
  const auto& calls = driver();
  if (kernel.func && calls.function_attribute)
    calls.function_attribute(&limit, shared_memory_limit_attribute, kernel.func);
  else if (kernel.kern && calls.kernel_attribute && cudaGetDevice(&device) == cudaSuccess)
    calls.kernel_attribute(&limit, shared_memory_limit_attribute, kernel.kern, device);
  return limit;
}

/// A refused kernel node's shared memory, for the log.
std::string shared_memory_of(const CUDA_KERNEL_NODE_PARAMS& kernel) {
  int limit = shared_memory_limit(kernel);
  return std::to_string(kernel.sharedMemBytes) + " bytes of dynamic shared memory, its kernel "
         + "allowing " + (limit < 0 ? std::string("an unknown amount") : std::to_string(limit));
}

} // namespace

struct bound_inputs::node_arguments {
  cudaGraphNode_t node = nullptr;
  bool is_copy = false;
  kernel_arguments kernel;   ///< a kernel node: its launch
  cudaMemcpy3DParms copy{};  ///< a memcpy node: its copy
  std::vector<pointer_slot> slots;

  /// Hands the node's arguments to `exec`; the error code, 0 if taken.
  int set_in(cudaGraphExec_t exec) const {
    if (is_copy)
      return static_cast<int>(cudaGraphExecMemcpyNodeSetParams(exec, node, &copy));
    // A refusal is not mended by raising the kernel's shared memory limit:
    // that limit belongs to the library that launches the kernel (a raise
    // ended a convnet's shape sweep in cuDNN: docs/design.md, Known gaps).
    return static_cast<int>(driver().set_node_arguments(exec, node, &kernel.launch));
  }
};

bound_inputs::bound_inputs() = default;
bound_inputs::~bound_inputs() = default;
bound_inputs::bound_inputs(bound_inputs&&) noexcept = default;
bound_inputs& bound_inputs::operator=(bound_inputs&&) noexcept = default;

bound_inputs bound_inputs::find(cudaGraph_t graph, cudaGraph_t twin,
                                const std::vector<twin_buffers>& buffers) {
  bound_inputs found;
  found.kept_.assign(buffers.size(), false);
  auto refuse = [&found](std::string why) {
    found.nodes_.clear();
    std::fill(found.kept_.begin(), found.kept_.end(), false);
    found.why_not_ = std::move(why);
    return std::move(found);
  };
  if (!driver().rebinds())
    return refuse("the CUDA driver lacks cuFuncGetParamInfo (CUDA 12.4)");

  shift_index moved_by(buffers);
  std::vector<bool> written(buffers.size(), false);
  // The slot of a word that moved as an input did; its offset from that input.
  auto derived = [&](uintptr_t in_graph, uintptr_t in_twin) -> std::optional<pointer_slot> {
    if (in_graph == in_twin)
      return std::nullopt;
    auto input = moved_by.find(in_twin - in_graph);
    if (!input)
      return std::nullopt;
    const auto& buffer = buffers[*input];
    auto offset = in_graph - reinterpret_cast<uintptr_t>(buffer.in_graph);
    // Within [-bytes, 2 bytes) of the buffer's first byte, as a signed distance.
    if (offset + buffer.bytes >= 3 * buffer.bytes)
      return std::nullopt;
    return pointer_slot{0, *input, offset};
  };
  // In the order they were captured: a pair that does not match in kind or
  // kernel refuses the binding; two like nodes swapped would only leave
  // their pointers unbound.
  auto nodes = nodes_of(graph), twins = nodes_of(twin);
  if (nodes.size() != twins.size())
    return refuse("its two captures differ in their number of nodes");

  for (size_t n = 0; n < nodes.size(); ++n) {
    cudaGraphNodeType type{}, twin_type{};
    C10_CUDA_CHECK(cudaGraphNodeGetType(nodes[n], &type));
    C10_CUDA_CHECK(cudaGraphNodeGetType(twins[n], &twin_type));
    if (type != twin_type)
      return refuse("its two captures differ in a node's kind");
    auto arguments = std::make_unique<node_arguments>();
    arguments->node = nodes[n];
    switch (type) {
      case cudaGraphNodeTypeKernel: {
        auto& kernel = arguments->kernel;
        kernel_arguments twin_kernel;
        auto why = read_arguments(nodes[n], kernel);
        if (why.empty())
          why = read_arguments(twins[n], twin_kernel);
        if (!why.empty())
          return refuse(why);
        if (kernel.launch.func != twin_kernel.launch.func
            || kernel.launch.kern != twin_kernel.launch.kern)
          return refuse("its two captures differ in a kernel");
        for (auto [offset, size] : kernel.layout)
          for (size_t at = (offset + 3) / 4 * 4; at + 8 <= offset + size;) {
            uintptr_t word = 0, twin_word = 0;
            std::memcpy(&word, kernel.values.data() + at, sizeof word);
            std::memcpy(&twin_word, twin_kernel.values.data() + at, sizeof twin_word);
            auto slot = derived(word, twin_word);
            if (!slot) {
              at += 4;
              continue;
            }
            slot->at = at;
            arguments->slots.push_back(*slot);
            at += 8;
          }
        break;
      }
      case cudaGraphNodeTypeMemcpy: {
        auto& copy = arguments->copy;
        cudaMemcpy3DParms twin_copy{};
        C10_CUDA_CHECK(cudaGraphMemcpyNodeGetParams(nodes[n], &copy));
        C10_CUDA_CHECK(cudaGraphMemcpyNodeGetParams(twins[n], &twin_copy));
        arguments->is_copy = true;
        auto address = [](const cudaPitchedPtr& p) { return reinterpret_cast<uintptr_t>(p.ptr); };
        if (auto slot = derived(address(copy.dstPtr), address(twin_copy.dstPtr)))
          written[slot->input] = true;
        if (auto slot = derived(address(copy.srcPtr), address(twin_copy.srcPtr)))
          arguments->slots.push_back(*slot);
        break;
      }
      case cudaGraphNodeTypeMemset: {
        cudaMemsetParams set{}, twin_set{};
        C10_CUDA_CHECK(cudaGraphMemsetNodeGetParams(nodes[n], &set));
        C10_CUDA_CHECK(cudaGraphMemsetNodeGetParams(twins[n], &twin_set));
        if (auto slot = derived(reinterpret_cast<uintptr_t>(set.dst),
                                reinterpret_cast<uintptr_t>(twin_set.dst)))
          written[slot->input] = true;
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
    keep[i] = buffers[i].in_graph && moved_by.find(shift_index::shift_of(buffers[i])) == i
              && !written[i];
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
  readers_.assign(kept_.size(), {});
  for (uint32_t n = 0; n < nodes_.size(); ++n)
    for (const auto& slot : nodes_[n]->slots)
      if (readers_[slot.input].empty() || readers_[slot.input].back() != n)
        readers_[slot.input].push_back(n);
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
    if (!rewrite(exec, *node, sources))
      return std::nullopt;
    ++rewritten;
  }
  bound_to_ = sources;
  return rewritten;
}

std::optional<size_t> bound_inputs::bind_moved(
    cudaGraphExec_t exec, const std::vector<std::pair<uint32_t, const void*>>& moved) {
  if (bound_to_.size() != kept_.size())
    return std::nullopt;
  std::vector<uint32_t> due;
  for (auto [input, address] : moved)
    if (bound_to_[input] != address)
      due.insert(due.end(), readers_[input].begin(), readers_[input].end());
  std::sort(due.begin(), due.end());
  due.erase(std::unique(due.begin(), due.end()), due.end());
  for (auto n : due)
    for (const auto& slot : nodes_[n]->slots)
      if (!bound_to_[slot.input])
        return std::nullopt;  // that node's other inputs are not known
  for (auto [input, address] : moved)
    bound_to_[input] = address;
  for (auto n : due)
    if (!rewrite(exec, *nodes_[n], bound_to_))
      return std::nullopt;
  return due.size();
}

bool bound_inputs::move_pointers(cudaGraphExec_t exec, const std::vector<pointer_move>& moves) {
  for (auto& node : nodes_) {
    bool any = false;
    if (node->is_copy) {
      for (void** end : {&node->copy.srcPtr.ptr, &node->copy.dstPtr.ptr}) {
        auto* to = const_cast<void*>(moved_pointer(*end, moves));
        any = any || to != *end;
        *end = to;
      }
    } else {
      for (auto [offset, size] : node->kernel.layout)
        any = move_words(node->kernel.values.data(), offset, offset + size, moves) || any;
    }
    if (!any)
      continue;
    if (int status = node->set_in(exec); status != 0) {
      (void)cudaGetLastError();
      refusal_ = std::string(node->is_copy ? "a memcpy node" : "a kernel node") + " (error "
                 + std::to_string(status) + ")";
      return false;
    }
  }
  return true;
}

bool bound_inputs::rewrite(cudaGraphExec_t exec, node_arguments& node,
                           const std::vector<const void*>& sources) {
  for (const auto& slot : node.slots) {
    uintptr_t address = reinterpret_cast<uintptr_t>(sources[slot.input]) + slot.offset;
    if (node.is_copy)
      node.copy.srcPtr.ptr = reinterpret_cast<void*>(address);
    else
      std::memcpy(node.kernel.values.data() + slot.at, &address, sizeof address);
  }
  int status = node.set_in(exec);
  if (status == 0)
    return true;
  (void)cudaGetLastError();
  std::fill(bound_to_.begin(), bound_to_.end(), nullptr);
  refused_inputs_.clear();
  for (const auto& other : nodes_)
    if (other.get() == &node
        || (!node.is_copy && !other->is_copy && other->kernel.launch.func == node.kernel.launch.func
            && other->kernel.launch.kern == node.kernel.launch.kern))
      for (const auto& slot : other->slots)
        refused_inputs_.push_back(slot.input);
  std::sort(refused_inputs_.begin(), refused_inputs_.end());
  refused_inputs_.erase(std::unique(refused_inputs_.begin(), refused_inputs_.end()),
                        refused_inputs_.end());
  refusal_ = node.is_copy ? "a memcpy node (error " + std::to_string(status) + ")"
                          : "a kernel node (error " + std::to_string(status) + "; "
                                + shared_memory_of(node.kernel.launch) + ")";
  return false;
}

} // namespace gradd::cuda
