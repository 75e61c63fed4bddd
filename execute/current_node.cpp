// Note [The current node]
// The stock engine makes each node it runs the thread's current node
// (NodeGuard in engine.cpp), which torch::autograd::get_current_node() and
// torch._C._current_autograd_node() return: custom Functions, hooks and
// saved-tensor unpack hooks ask for it (to register a hook on the node
// being run, to name it in a profile), and anomaly mode makes it the parent
// of the nodes a backward creates. libtorch exports the getter but not the
// guard. The variable behind both is a c10::ThreadLocal, whose first member
// is the accessor function that returns this thread's variable; the getter
// calls that accessor through a RIP-relative `call *` as its third
// instruction (x86-64, GCC's code for function.cpp). gradd finds the
// accessor there once, checks that it lies in the same library as the
// getter, and proves it by a round trip before any plan relies on it: a node
// stored through it must be what get_current_node() returns. Where any step
// fails (another architecture or build of libtorch) nothing is set, and
// gradd::enable says so once.

#include "execute/current_node.hpp"

#include <torch/csrc/autograd/function.h>

#include <dlfcn.h>

#include <cstdint>
#include <cstring>

namespace gradd::execute {

namespace {

using torch::autograd::Node;
using accessor = std::shared_ptr<Node>* (*)();

/// A node that only stands in the current-node variable for the round trip.
struct probe_node final : Node {
  torch::autograd::variable_list apply(torch::autograd::variable_list&&) override { return {}; }
};

bool same_library(const void* a, const void* b) {
  Dl_info info_a{};
  Dl_info info_b{};
  return dladdr(a, &info_a) != 0 && dladdr(b, &info_b) != 0
         && info_a.dli_fbase == info_b.dli_fbase;
}

/// The accessor get_current_node() calls, read from its code; null where
/// that code is not the expected `push %rbx; mov %rdi,%rbx; call *d(%rip)`.
accessor accessor_in_getter() {
#if defined(__x86_64__)
  void* library = dlopen("libtorch_cpu.so", RTLD_NOLOAD | RTLD_LAZY);
  if (library == nullptr)
    return nullptr;
  const auto* code = static_cast<const uint8_t*>(
      dlsym(library, "_ZN5torch8autograd16get_current_nodeEv"));
  dlclose(library);
  static constexpr uint8_t prologue[] = {0x53, 0x48, 0x89, 0xfb, 0xff, 0x15};
  if (code == nullptr || std::memcmp(code, prologue, sizeof prologue) != 0)
    return nullptr;
  int32_t displacement = 0;
  std::memcpy(&displacement, code + sizeof prologue, sizeof displacement);
  const uint8_t* pointer_at = code + sizeof prologue + sizeof displacement + displacement;
  if (!same_library(code, pointer_at))
    return nullptr;
  accessor found = nullptr;
  std::memcpy(&found, pointer_at, sizeof found);
  if (found == nullptr || !same_library(code, reinterpret_cast<const void*>(found)))
    return nullptr;
  return found;
#else
  return nullptr;
#endif
}

/// Whether nodes stored through `slot` are what libtorch reports.
bool round_trip(std::shared_ptr<Node>* slot) {
  if (slot == nullptr)
    return false;
  auto callers = std::move(*slot);
  auto probe = std::make_shared<probe_node>();
  *slot = probe;
  bool seen = torch::autograd::get_current_node() == probe;
  *slot = std::move(callers);
  return seen;
}

accessor proven_accessor() {
  static const accessor proven = [] {
    auto found = accessor_in_getter();
    return found != nullptr && round_trip(found()) ? found : nullptr;
  }();
  return proven;
}

} // namespace

bool current_node_reachable() noexcept {
  return proven_accessor() != nullptr;
}

current_node_scope::current_node_scope() {
  auto found = proven_accessor();
  slot_ = found != nullptr ? found() : nullptr;
  if (slot_ != nullptr)
    callers_ = *slot_;
}

current_node_scope::~current_node_scope() {
  if (slot_ != nullptr)
    *slot_ = std::move(callers_);
}

void current_node_scope::enter(Node& fn) {
  if (slot_ != nullptr)
    *slot_ = fn.getptr();
}

} // namespace gradd::execute
