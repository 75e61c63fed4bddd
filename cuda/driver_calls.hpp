#pragma once

// The CUDA driver calls gradd needs that the runtime does not offer, taken
// from the driver libtorch already loaded. A call the driver lacks is null.

#include <cuda.h>
#include <cudaTypedefs.h>

namespace gradd::cuda {

struct driver_calls {
  // A kernel node's arguments (bound_inputs.cpp).
  PFN_cuGraphKernelNodeGetParams_v12000 node_arguments = nullptr;
  PFN_cuGraphExecKernelNodeSetParams_v12000 set_node_arguments = nullptr;
  PFN_cuGraphKernelNodeSetParams_v12000 set_graph_node_arguments = nullptr;  // not instantiated
  PFN_cuFuncGetParamInfo_v12040 function_argument = nullptr;
  PFN_cuKernelGetParamInfo_v12040 kernel_argument = nullptr;
  // A kernel's dynamic shared memory limit, read for a refusal's message.
  PFN_cuFuncGetAttribute_v2020 function_attribute = nullptr;
  PFN_cuKernelGetAttribute_v12000 kernel_attribute = nullptr;

  /// Whether a graph's kernel arguments can be read and rewritten.
  bool rebinds() const noexcept {
    return node_arguments && set_node_arguments && set_graph_node_arguments && function_argument
           && kernel_argument;
  }
};

/// The process's driver calls, looked up once.
const driver_calls& driver();

} // namespace gradd::cuda
