// Peak memory: the CPU byte counter and the CUDA allocator's statistics.

#include "bench/peak_memory.hpp"

#include <c10/core/CPUAllocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace gradd::measure {

namespace {

std::atomic<int64_t> cpu_current{0};
std::atomic<int64_t> cpu_peak{0};

/// Counts the bytes of the allocations it forwards to `inner`. libtorch
/// expects a CPU allocation's context to be its data pointer, so sizes live in
/// a side table and the inner allocator's raw deleter frees.
class counting_allocator final : public c10::Allocator {
public:
  explicit counting_allocator(c10::Allocator* inner) : inner_(inner) {
    free_inner = inner->raw_deleter();
    TORCH_CHECK(free_inner != nullptr, "gradd: the CPU allocator has no raw deleter");
  }

  c10::DataPtr allocate(size_t n) override {
    auto inner = inner_->allocate(n);
    auto device = inner.device();
    void* data = inner.release_context();
    if (data == nullptr)
      return {nullptr, nullptr, &release, device};
    auto bytes = static_cast<int64_t>(n);
    {
      std::lock_guard lock(mutex());
      sizes().emplace(data, bytes);
    }
    auto now = cpu_current.fetch_add(bytes) + bytes;
    auto peak = cpu_peak.load();
    while (now > peak && !cpu_peak.compare_exchange_weak(peak, now))
      ;
    return {data, data, &release, device};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

private:
  // Never destroyed: tensors held by other statics are freed through
  // release() at exit, after this file's statics would be gone (an
  // UndefinedBehaviorSanitizer report in the suite's exit, a recording a
  // test kept).
  static std::mutex& mutex() {
    static auto* m = new std::mutex;
    return *m;
  }
  static std::unordered_map<void*, int64_t>& sizes() {
    static auto* table = new std::unordered_map<void*, int64_t>;
    return *table;
  }

  static void release(void* data) {
    if (data == nullptr)
      return;
    int64_t bytes = 0;
    {
      std::lock_guard lock(mutex());
      auto found = sizes().find(data);
      bytes = found->second;
      sizes().erase(found);
    }
    cpu_current.fetch_sub(bytes);
    free_inner(data);
  }

  static inline c10::DeleterFnPtr free_inner = nullptr;  // one instance per process

  c10::Allocator* inner_;
};

c10::DeviceAllocator& cuda_allocator() {
  auto* allocator = c10::getDeviceAllocator(c10::DeviceType::CUDA);
  TORCH_CHECK(allocator != nullptr, "gradd: no CUDA allocator");
  return *allocator;
}

constexpr size_t aggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);

/// `device`, with the current CUDA device's index where it has none.
c10::Device with_index(c10::Device device) {
  if (device.is_cuda() && !device.has_index())
    return c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA).getDevice();
  return device;
}

} // namespace

void install_cpu_peak_tracking() {
  static auto* counter = [] {
    auto* allocator = new counting_allocator(c10::GetCPUAllocator());
    c10::SetCPUAllocator(allocator, /*priority=*/100);
    return allocator;
  }();
  (void)counter;
}

void reset_cuda_peaks(c10::Device device) {
  auto& allocator = cuda_allocator();
  allocator.emptyCache();
  allocator.resetPeakStats(with_index(device).index());
}

device_peaks cuda_peaks(c10::Device device) {
  auto stats = cuda_allocator().getDeviceStats(with_index(device).index());
  return {stats.allocated_bytes[aggregate].peak, stats.reserved_bytes[aggregate].peak};
}

peak_memory::peak_memory(c10::Device device) : device_(with_index(device)) {
  if (device_.is_cuda()) {
    auto& allocator = cuda_allocator();
    start_ = allocator.getDeviceStats(device_.index()).allocated_bytes[aggregate].current;
    allocator.resetPeakStats(device_.index());
  } else {
    start_ = cpu_current.load();
    cpu_peak.store(start_);
  }
}

int64_t peak_memory::peak_above_start() const {
  if (device_.is_cuda())
    return cuda_allocator().getDeviceStats(device_.index()).allocated_bytes[aggregate].peak - start_;
  return cpu_peak.load() - start_;
}

} // namespace gradd::measure
