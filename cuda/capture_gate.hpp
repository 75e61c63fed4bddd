#pragma once

// Note [Device synchronizes during captures]
// A device-wide synchronize (cudaDeviceSynchronize) while any stream of the
// process is capturing fails ("operation not permitted when stream is
// capturing") and invalidates that capture, whatever its capture mode;
// measured on a Hopper GPU with thread-local and relaxed captures, where a
// stream synchronize, `.item()`, pinned allocations and `empty_cache()` on
// another thread did not conflict. gradd captures on its stream actors'
// threads while training goes on, and training loops synchronize the
// device (to time a step, say). So every capture holds the capture gate
// from its begin to its end, and a device synchronize waits at the gate for
// the capture in flight, a few milliseconds at most (a capture only queues
// work). Device synchronizes reach the gate three ways: gradd's definition
// of c10::cuda::device_synchronize, which stands in for libc10_cuda's in a
// program linked with libgradd ahead of libtorch (torch::cuda::synchronize
// and every other caller in the process go through it); the `gradd` Python
// package, which puts its own torch.cuda.synchronize in place (a library
// loaded by Python cannot stand in for another's symbols); and
// gradd::synchronize_device. A direct cudaDeviceSynchronize bypasses it.

namespace gradd::cuda {

/// Holds the capture gate for one capture, on the capturing thread.
class capture_gate_scope {
public:
  capture_gate_scope();
  ~capture_gate_scope();
  capture_gate_scope(const capture_gate_scope&) = delete;
  capture_gate_scope& operator=(const capture_gate_scope&) = delete;
};

/// libc10_cuda's device_synchronize, once no capture is in flight (on the
/// capturing thread itself at once: it fails there, as it would without
/// the gate, and the capture reports why).
void synchronize_after_captures();

} // namespace gradd::cuda
