// The capture gate (Note [Device synchronizes during captures]).

#include "cuda/capture_gate.hpp"

#include <c10/cuda/CUDAFunctions.h>
#include <c10/util/Exception.h>

#include <dlfcn.h>

#include <shared_mutex>

namespace gradd::cuda {

namespace {

std::shared_mutex& gate() {
  static std::shared_mutex mutex;
  return mutex;
}

thread_local bool capturing = false;

using synchronize_fn = void (*)();

/// libc10_cuda's own device_synchronize, not the definition below.
synchronize_fn libc10_device_synchronize() {
  static const synchronize_fn found = [] {
    void* library = dlopen("libc10_cuda.so", RTLD_NOLOAD | RTLD_LAZY);
    auto* symbol = library != nullptr ? dlsym(library, "_ZN3c104cuda18device_synchronizeEv")
                                      : nullptr;
    if (library != nullptr)
      dlclose(library);
    return reinterpret_cast<synchronize_fn>(symbol);
  }();
  TORCH_CHECK(found != nullptr, "gradd: libc10_cuda's device_synchronize was not found");
  return found;
}

} // namespace

capture_gate_scope::capture_gate_scope() {
  gate().lock();
  capturing = true;
}

capture_gate_scope::~capture_gate_scope() {
  capturing = false;
  gate().unlock();
}

void synchronize_after_captures() {
  if (capturing) {
    libc10_device_synchronize()();
    return;
  }
  std::shared_lock wait(gate());
  libc10_device_synchronize()();
}

} // namespace gradd::cuda

// Stands in for libc10_cuda's definition where the program links libgradd
// ahead of it (Note [Device synchronizes during captures]).
void c10::cuda::device_synchronize() {
  gradd::cuda::synchronize_after_captures();
}
