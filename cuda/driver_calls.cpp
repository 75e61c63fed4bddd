// The driver calls of driver_calls.hpp.

#include "cuda/driver_calls.hpp"

#include <cuda_runtime_api.h>

#include <type_traits>

namespace gradd::cuda {

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
    load("cuGraphKernelNodeSetParams", c.set_graph_node_arguments, 12000);
    load("cuFuncGetParamInfo", c.function_argument, 12040);
    load("cuKernelGetParamInfo", c.kernel_argument, 12040);
    load("cuFuncGetAttribute", c.function_attribute, 2020);
    load("cuKernelGetAttribute", c.kernel_attribute, 12000);
    return c;
  }();
  return calls;
}

} // namespace gradd::cuda
