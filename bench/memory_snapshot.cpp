#include "bench/memory_snapshot.hpp"

#include <fstream>
#include <stdexcept>

#ifdef GRADD_CUDA_HEADERS
#include <torch/csrc/cuda/memory_snapshot.h>
#endif

namespace gradd::measure {

#ifdef GRADD_CUDA_HEADERS

void record_allocation_stacks() {
  torch::cuda::_record_memory_history(/*enabled=*/true, /*record_context=*/true,
                                      /*trace_alloc_max_entries=*/1000000,
                                      /*trace_alloc_record_context=*/true,
                                      /*record_cpp_context=*/true, /*clearHistory=*/true);
}

void write_memory_snapshot(const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  out << torch::cuda::_memory_snapshot_pickled();
  if (!out)
    throw std::runtime_error("cannot write the memory snapshot to " + path);
}

#else

namespace {

[[noreturn]] void needs_cuda() {
  throw std::runtime_error("memory snapshots need a build with the CUDA toolkit");
}

} // namespace

void record_allocation_stacks() {
  needs_cuda();
}

void write_memory_snapshot(const std::string&) {
  needs_cuda();
}

#endif

} // namespace gradd::measure
