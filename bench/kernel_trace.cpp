// The profiler session of kernel_trace.hpp.

#include "bench/kernel_trace.hpp"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace gradd::measure {

void record_kernel_trace(const std::string& path, const std::function<void()>& work) {
  namespace profiler = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  const std::set<ActivityType> activities{ActivityType::CUDA};
  torch::profiler::impl::ProfilerConfig config(torch::profiler::impl::ProfilerState::KINETO);
  profiler::prepareProfiler(config, activities);
  profiler::enableProfiler(config, activities);
  try {
    work();
  } catch (...) {
    profiler::disableProfiler();
    throw;
  }
  std::remove(path.c_str());
  profiler::disableProfiler()->save(path);
  // The profiler says nothing where it cannot write.
  if (!std::ifstream(path))
    throw std::runtime_error("cannot write the kernel trace to " + path);
}

} // namespace gradd::measure
