"""gradd's Python benchmark: ``python3 -m gradd.bench --model M --mode both``.

Times backwards of models defined in Python (one from torchvision, built
from its configuration, no downloaded weights; ``ddp``, the mlp in
DistributedDataParallel on a process group of this process alone) under
gradd and on the stock engine, interleaved in one process, and prints one JSON line with
gradd-bench's keys: median_ms, p90_ms, first_ms, plan_backwards,
graph_backwards, eager_backwards, max_rel_grad_diff, stock_rel_grad_diff,
and with ``--mode both`` eager_median_ms and ratio (gradd over stock),
eager_first_ms and first_ratio, and the five-round first_median_ms,
eager_first_median_ms and first_median_ratio; on
CUDA also floor_ms, the stock engine's backward kernels replayed from one
CUDA graph, and floor_ratio (gradd over floor), as gradd-bench gives them,
and the whole training step's memory, forward + backward + an Adam step:
step_peak_mb and step_reserved_mb (``max_memory_allocated`` and
``max_memory_reserved``), eager_step_peak_mb and eager_step_reserved_mb,
step_peak_ratio and step_reserved_ratio (gradd over stock), and
step_graph_backwards, how many of gradd's measured steps a graph served.
``--create-graph`` times gradient-penalty steps instead (no floor).
"""

import argparse
import functools
import json
import statistics
import sys
import time

import torch

import gradd


class ScaledTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y * 1.5

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * 1.5 * (1 - y * y)


class HookedNet(torch.nn.Module):
    """Python constructs on every layer: a custom Function, tensor hooks,
    module backward hooks, post-accumulate-grad hooks."""

    def __init__(self, width=128, depth=6):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(depth))
        for layer in self.layers:
            layer.register_full_backward_hook(lambda module, gin, gout: None)
        for p in self.parameters():
            p.register_post_accumulate_grad_hook(lambda p: None)

    def forward(self, x):
        for layer in self.layers:
            x = ScaledTanh.apply(layer(x))
            x.register_hook(lambda g: g * 0.5)
        return x


def one_rank_group(device):
    """A process group of this process alone (NCCL on CUDA, gloo on the
    CPU), for DistributedDataParallel."""
    import socket

    import torch.distributed as dist

    if not dist.is_initialized():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        dist.init_process_group("nccl" if device == "cuda" else "gloo",
                                init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)


def make_model(name, device, dtype=torch.float32):
    """The model `name` and a function giving its input for step `i`."""
    torch.manual_seed(0)
    if name in ("mlp", "ddp"):
        layers = []
        for _ in range(8):
            layers += [torch.nn.Linear(256, 256), torch.nn.GELU()]
        model, shape = torch.nn.Sequential(*layers), (64, 256)
    elif name == "hooked":
        model, shape = HookedNet(), (64, 128)
    elif name in ("transformer", "transformer-dropout"):
        dropout = 0.1 if name == "transformer-dropout" else 0.0
        layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=dropout, batch_first=True)
        model, shape = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), (8, 16, 64)
    elif name == "resnet18":
        import torchvision  # a model library Python users train with

        model, shape = torchvision.models.resnet18(weights=None, num_classes=10), (4, 3, 64, 64)
    else:
        raise SystemExit(f"gradd.bench: unknown model {name!r} ({', '.join(MODELS)})")
    model = model.to(device=device, dtype=dtype)
    if name == "ddp":  # one rank: the reducer's hooks and bucket all-reduces, no peer
        one_rank_group(device)
        model = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1)

    def batch(i):
        g = torch.Generator().manual_seed(i % 8)
        return torch.randn(*shape, generator=g, dtype=dtype).to(device)

    return model, batch


MODELS = ("mlp", "hooked", "transformer", "transformer-dropout", "resnet18", "ddp")


def backward_once(model, batch, i, device, create_graph=False):
    """One forward and backward (grads set to None first); the backward's ms.
    With `create_graph`, a gradient-penalty step, both backwards timed: the
    loss's gradients with create_graph=True, then the backward of the loss
    plus their squared norm."""
    for p in model.parameters():
        p.grad = None
    torch.manual_seed(1000 + i)  # the same dropout masks on both engines
    loss = model(batch(i)).square().mean()
    if device == "cuda":
        torch.cuda.current_stream().synchronize()
    start = time.perf_counter()
    if create_graph:
        params = [p for p in model.parameters() if p.requires_grad]
        found = torch.autograd.grad(loss, params, create_graph=True, allow_unused=True)
        loss = loss + sum(g.square().sum() for g in found if g is not None)
    loss.backward()
    if device == "cuda":
        torch.cuda.current_stream().synchronize()
    return (time.perf_counter() - start) * 1e3


def grads(model):
    return [None if p.grad is None else p.grad.detach().clone() for p in model.parameters()]


def max_rel_diff(expected, actual):
    worst = 0.0
    for a, b in zip(expected, actual):
        if (a is None) != (b is None):
            return float("inf")
        if a is not None:
            scale = max(a.abs().max().item(), 1e-30)
            worst = max(worst, (a - b).abs().max().item() / scale)
    return worst


def step_memory(model, batch, i, device, steps=3):
    """The peak of `steps` whole training steps (forward, backward, an Adam
    step with lr 0, so the parameters stay as they are), each from a reset of
    the peaks: (max_memory_allocated, max_memory_reserved) in bytes. The
    caching allocator's unused blocks go back to the device first."""
    optimizer = torch.optim.Adam(model.parameters(), lr=0.0)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    allocated = reserved = 0
    for k in range(steps):
        torch.cuda.reset_peak_memory_stats()
        backward_once(model, batch, i + k, device)
        optimizer.step()
        torch.cuda.synchronize()
        allocated = max(allocated, torch.cuda.max_memory_allocated())
        reserved = max(reserved, torch.cuda.max_memory_reserved())
    return allocated, reserved


def backward_floor_ms(model, batch, i, runs=50):
    """The stock engine's backward captured whole into one CUDA graph (the
    forward outside the capture, warm-ups on a side stream, as PyTorch's
    whole-network capture does it); the median ms of its replays."""
    # A backward recorded for a capture still under way holds the
    # parameters' AccumulateGrad nodes; the capture below would reuse them
    # from another stream (gradd-bench's floor ended the process so).
    gradd.wait_for_compiles()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    times = []
    with gradd.disabled(), torch.cuda.stream(side):
        for _ in range(3):
            for p in model.parameters():
                p.grad = None
            model(batch(i)).square().mean().backward()
        for p in model.parameters():
            p.grad = None
        loss = model(batch(i)).square().mean()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):
            loss.backward()
        graph.replay()  # the first replay uploads the graph
        torch.cuda.synchronize()
        for _ in range(runs):
            start = time.perf_counter()
            graph.replay()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - start) * 1e3)
        for p in model.parameters():
            p.grad = None  # its tensors live in the graph's pool, freed with it
    torch.cuda.current_stream().wait_stream(side)
    return statistics.median(times)


# Untimed stock backwards first, as in gradd-bench: the device, the
# allocator and the stock engine's device thread warm up, not an engine.
STOCK_WARMUPS = 3
FIRST_ROUNDS = 5


def new_structure_firsts(once, model, batch, step, device):
    """A new structure's first backward, FIRST_ROUNDS times on batch `step`:
    reset() makes the structure new to gradd again, and gradd's first
    backward and the stock engine's of the same batch take turns at going
    first, each with nothing compiling. Returns the two medians (gradd's,
    the stock engine's). Call last: reset() zeroes gradd's statistics."""
    ours, stock = [], []
    for r in range(FIRST_ROUNDS):
        gradd.wait_for_compiles()
        gradd.reset()
        for with_gradd in (r % 2 == 0, r % 2 != 0):
            gradd.wait_for_compiles()
            if with_gradd:
                ours.append(once(model, batch, step, device))
            else:
                with gradd.disabled():
                    stock.append(once(model, batch, step, device))
    return statistics.median(ours), statistics.median(stock)


def run(args):
    model, batch = make_model(args.model, args.device)
    once = functools.partial(backward_once, create_graph=args.create_graph)
    ours, stock = [], []
    gradd.reset()
    # The stock engine's step before gradd holds any graph, whose pools
    # the process would count for it too.
    measures_steps = args.device == "cuda" and args.mode == "both" and not args.create_graph
    if measures_steps:
        with gradd.disabled():
            eager_step = step_memory(model, batch, 0, args.device)
    with gradd.enabled(args.config):
        with gradd.disabled():
            for _ in range(STOCK_WARMUPS):
                once(model, batch, 0, args.device)
        first_ms = once(model, batch, 0, args.device)
        if args.mode == "both":
            with gradd.disabled():
                eager_first_ms = once(model, batch, 0, args.device)
        for i in range(1, args.warmup):
            if args.mode == "both":
                with gradd.disabled():
                    once(model, batch, i, args.device)
            once(model, batch, i, args.device)
        gradd.wait_for_compiles()
        before = gradd.stats()
        for i in range(args.warmup, args.warmup + args.iters):
            if args.mode != "gradd":
                with gradd.disabled():
                    stock.append(once(model, batch, i, args.device))
            if args.mode != "eager":
                ours.append(once(model, batch, i, args.device))
        after = gradd.stats()
        last = args.warmup + args.iters
        with gradd.disabled():
            once(model, batch, last, args.device)
            reference = grads(model)
            once(model, batch, last, args.device)
            reference_again = grads(model)
        once(model, batch, last, args.device)
        served = grads(model)
        if measures_steps:
            replays_before = gradd.stats()["graph_backwards"]
            gradd_step = step_memory(model, batch, last, args.device)
            step_replays = gradd.stats()["graph_backwards"] - replays_before
        if args.mode == "both":
            first_median_ms, eager_first_median_ms = new_structure_firsts(
                once, model, batch, last + 1, args.device)

    main = ours if args.mode != "eager" else stock
    main.sort()
    line = {
        "model": args.model, "device": args.device, "mode": args.mode,
        "create_graph": args.create_graph,
        "median_ms": round(statistics.median(main), 4),
        "p90_ms": round(main[int(0.9 * (len(main) - 1))], 4),
        "first_ms": round(first_ms, 4),
        "plan_backwards": after["plan_backwards"] - before["plan_backwards"],
        "graph_backwards": after["graph_backwards"] - before["graph_backwards"],
        "eager_backwards": (after["eager_backwards"] - before["eager_backwards"]
                            if args.mode != "eager" else args.iters),
        "max_rel_grad_diff": max_rel_diff(reference, served),
        "stock_rel_grad_diff": max_rel_diff(reference, reference_again),
    }
    if args.mode == "both":
        line["eager_median_ms"] = round(statistics.median(stock), 4)
        line["ratio"] = round(line["median_ms"] / line["eager_median_ms"], 4)
        line["eager_first_ms"] = round(eager_first_ms, 4)
        line["first_ratio"] = round(first_ms / eager_first_ms, 4)
        line["first_median_ms"] = round(first_median_ms, 4)
        line["eager_first_median_ms"] = round(eager_first_median_ms, 4)
        line["first_median_ratio"] = round(first_median_ms / eager_first_median_ms, 4)
        # DDP's AccumulateGrad nodes keep the stream DDP was built on, which
        # a capture on another stream cannot make wait; attention with
        # dropout reads its seed on the host, which a capture would freeze:
        # no floor for them.
        if (args.device == "cuda" and not args.create_graph
                and args.model not in ("ddp", "transformer-dropout")):
            line["floor_ms"] = round(backward_floor_ms(model, batch, last), 4)
            line["floor_ratio"] = round(line["median_ms"] / line["floor_ms"], 4)
    if measures_steps:
        for key, ours_bytes, stock_bytes in (("peak", gradd_step[0], eager_step[0]),
                                             ("reserved", gradd_step[1], eager_step[1])):
            line[f"step_{key}_mb"] = round(ours_bytes / 2**20, 1)
            line[f"eager_step_{key}_mb"] = round(stock_bytes / 2**20, 1)
            line[f"step_{key}_ratio"] = round(ours_bytes / stock_bytes, 4)
        line["step_graph_backwards"] = step_replays
    return line


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m gradd.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=MODELS, default="mlp")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--mode", choices=("gradd", "eager", "both"), default="gradd")
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--config", default=None, help="a gradd policy file")
    parser.add_argument("--create-graph", action="store_true",
                        help="time gradient-penalty steps (a create_graph backward, then a "
                             "backward through it)")
    args = parser.parse_args(argv)
    if args.iters < 1 or args.warmup < 1:
        parser.error("--iters and --warmup must be at least 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda, but CUDA is not available on this machine")
    print(json.dumps(run(args)))
    if args.model == "ddp":
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
