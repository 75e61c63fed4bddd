// A CUDA graph's static buffers (see static_buffer.hpp).

#include "cuda/static_buffer.hpp"

#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

namespace gradd::cuda {

size_t span_bytes(const at::Tensor& t) {
  if (t.numel() == 0)
    return 0;
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d)
    last += (t.size(d) - 1) * t.stride(d);
  return static_cast<size_t>(last + 1) * t.element_size();
}

at::Tensor static_copy(const at::Tensor& t, size_t offset) {
  auto bytes = span_bytes(t);
  auto element = static_cast<size_t>(t.element_size());
  auto storage = at::empty({static_cast<int64_t>((offset + bytes) / element)}, t.options());
  auto* start = static_cast<char*>(storage.mutable_data_ptr()) + offset;
  if (bytes)
    C10_CUDA_CHECK(cudaMemcpyAsync(start, t.const_data_ptr(), bytes, cudaMemcpyDeviceToDevice,
                                   c10::cuda::getCurrentCUDAStream(t.device().index())));
  return storage.as_strided(t.sizes(), t.strides(), static_cast<int64_t>(offset / element));
}

at::Tensor layout_copy(const at::Tensor& t) {
  return static_copy(t, static_cast<size_t>(t.storage_offset()) * t.element_size());
}

} // namespace gradd::cuda
