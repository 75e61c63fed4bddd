"""Does cuDNN's batch-norm backward fail when two threads run it at once?

With gradd, a stream actor's thread and the training thread (or the stock
engine's device thread) can run cudnn_batch_norm_backward at the same time
for different batch sizes; PyTorch's own engine never does, since it runs
every CUDA backward on one device thread. It ran on a Hopper GPU
while looking for what ended convnet shape sweeps (docs/design.md, Known
gaps): none of these variants failed, except captures without a warm-up.
It runs without gradd:

  python3 scripts/cudnn_threads.py plain    two threads, each on a stream of
                                            its own, each its own batch sizes
  python3 scripts/cudnn_threads.py capture  one thread captures its calls into
                                            CUDA graphs (thread-local mode)
                                            while the other runs them eagerly
  python3 scripts/cudnn_threads.py same     two threads, one batch size
  python3 scripts/cudnn_threads.py alone    one thread does both threads' work

For `capture`: WARMUP=0 captures each size without an eager call first (its
kernels' first launch inside the capture), SHIFT=1 captures on inputs 256
bytes into their allocation (gradd's twin capture does), SAME=1 gives the
eager thread the capturing thread's sizes.

Each prints one JSON line: the failures seen and the first message. Run it
in fresh processes, under CUDA_MODULE_LOADING=LAZY and =EAGER.
"""
import json
import os
import sys
import threading

import torch

CHANNELS, SIDE, EPS = 32, 16, 1e-5
ITERS = int(os.environ.get("ITERS", "60"))
WARMUP, SHIFT, SAME = (os.environ.get(k, d) == "1" for k, d in (("WARMUP", "1"), ("SHIFT", "0"), ("SAME", "0")))


def batch_norm_backward(x, grad, weight, bias, stats):
    mean, var = stats
    out, save_mean, save_var, reserve = torch.ops.aten.cudnn_batch_norm(
        x, weight, bias, mean, var, True, 0.1, EPS)
    return torch.ops.aten.cudnn_batch_norm_backward(
        x, grad, weight, mean, var, save_mean, save_var, EPS, reserve)


def worker(sizes, capture, start, failures):
    stream = torch.cuda.Stream()
    weight = torch.ones(CHANNELS, device="cuda")
    bias = torch.zeros(CHANNELS, device="cuda")
    stats = (torch.zeros(CHANNELS, device="cuda"), torch.ones(CHANNELS, device="cuda"))
    # Drawn before the start: a capture puts the CUDA generator into capture
    # mode for every thread (torch.cuda.graph registers it).
    def draw(n):
        shift = 64 if capture and SHIFT else 0  # floats: 256 bytes
        numel = n * CHANNELS * SIDE * SIDE
        return torch.randn(numel + shift, device="cuda")[shift:].view(n, CHANNELS, SIDE, SIDE)
    inputs = {n: (draw(n), draw(n)) for n in sizes}
    torch.cuda.synchronize()
    start.wait()
    with torch.cuda.stream(stream):
        for i in range(ITERS):
            n = sizes[i % len(sizes)]
            x, grad = inputs[n]
            try:
                if capture:
                    graph = torch.cuda.CUDAGraph()
                    if WARMUP:  # as gradd's stream actor does
                        batch_norm_backward(x, grad, weight, bias, stats)
                        stream.synchronize()
                    with torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
                        batch_norm_backward(x, grad, weight, bias, stats)
                    graph.replay()
                else:
                    batch_norm_backward(x, grad, weight, bias, stats)
            except RuntimeError as e:
                failures.append(f"{threading.current_thread().name} n={n}: {str(e).splitlines()[0]}")
        stream.synchronize()


def main():
    variant = sys.argv[1]
    torch.backends.cudnn.enabled = True
    failures = []
    threads_sizes = [[8, 16] if SAME else [4, 12], [8, 16]]
    if variant == "alone":
        threads_sizes = [[4, 8, 12, 16]]
    elif variant == "same":
        threads_sizes = [[8], [8]]
    start = threading.Barrier(len(threads_sizes))
    threads = [threading.Thread(target=worker, name=f"t{i}",
                                args=(sizes, variant == "capture" and i == 1, start, failures))
               for i, sizes in enumerate(threads_sizes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"variant": variant, "loading": os.environ.get("CUDA_MODULE_LOADING", "default"),
                      "warmup": WARMUP, "shift": SHIFT, "same": SAME,
                      "failures": len(failures), "first": failures[:2]}))


if __name__ == "__main__":
    main()
