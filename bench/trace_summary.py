#!/usr/bin/env python3
"""Where each backward's time went, from a `gradd-bench --trace FILE` trace.

gradd-bench synchronizes the current stream twice in a row right before
each traced backward and once right after it, so a backward is the span
from the end of such a pair of `cudaStreamSynchronize` calls to the start
of the next one. With `--mode both` they alternate between gradd and the
stock engine, gradd's first. Per engine, medians in microseconds over its
backwards:

  total       the span (gradd-bench's timed backward, plus the profiler's cost)
  first_call  to the first CUDA call (the incoming gradient's fill kernel)
  graph_call  to gradd's cudaGraphLaunch (graphs only)
  second_call to the stock engine's second launch (its first node's kernel)
  to_gpu      to the first kernel, memcpy or memset starting on the GPU
  gpu_busy    time with at least one of them running
  tail        from the last one's end to the end of the span

CUPTI's tracing slows what it traces: a cudaGraphLaunch of the mlp's graph
took 37 us of CPU under it against 12 us for the whole launch without it
(a Hopper GPU), and a graph's kernels run further apart. The CPU side before the
first call is not traced and keeps its speed.

usage: bench/trace_summary.py TRACE.json [--mode both|gradd|eager]
"""

import argparse
import json
import statistics

GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
CALL_CATEGORIES = {"cuda_runtime", "cuda_driver"}
SYNC = "cudaStreamSynchronize"


def busy_time(intervals):
    busy, end = 0.0, None
    for start, stop in sorted(intervals):
        if end is None or start > end:
            busy += stop - start
            end = stop
        elif stop > end:
            busy += stop - end
            end = stop
    return busy


def backward_spans(calls):
    """(start, end) of each backward: after two synchronizations in a row,
    until the next one."""
    spans = []
    for i in range(1, len(calls)):
        if calls[i]["name"] != SYNC or calls[i - 1]["name"] != SYNC:
            continue
        start = calls[i]["ts"] + calls[i]["dur"]
        following = next((c for c in calls[i + 1:] if c["name"] == SYNC), None)
        if following:
            spans.append((start, following["ts"]))
    return spans


def summarize(calls, gpu, begin, end):
    inside = [c for c in calls if begin <= c["ts"] < end]
    ops = [(g["ts"], g["ts"] + g["dur"]) for g in gpu if begin <= g["ts"] < end]
    launches = [c for c in inside if "Launch" in c["name"] and c["name"] != "cudaGraphLaunch"]
    graphs = [c for c in inside if c["name"] == "cudaGraphLaunch"]
    row = {"total": end - begin,
           "first_call": inside[0]["ts"] - begin if inside else None,
           "graph_call": graphs[0]["ts"] - begin if graphs else None,
           "second_call": launches[1]["ts"] - begin if not graphs and len(launches) > 1 else None}
    if ops:
        row.update(to_gpu=min(s for s, _ in ops) - begin, gpu_busy=busy_time(ops),
                   tail=end - max(t for _, t in ops), gpu_ops=len(ops))
    return row


def median_row(rows):
    keys = [k for k in rows[0] if all(r.get(k) is not None for r in rows)]
    return {k: round(statistics.median(r[k] for r in rows), 1) for k in keys}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--mode", default="both", choices=["both", "gradd", "eager"])
    args = parser.parse_args()
    with open(args.trace) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    calls = sorted((e for e in events if e.get("cat") in CALL_CATEGORIES), key=lambda e: e["ts"])
    gpu = [e for e in events if e.get("cat") in GPU_CATEGORIES]
    engines = {"both": ["gradd", "stock"], "gradd": ["gradd"], "eager": ["stock"]}[args.mode]
    rows = {name: [] for name in engines}
    for i, (begin, end) in enumerate(backward_spans(calls)):
        rows[engines[i % len(engines)]].append(summarize(calls, gpu, begin, end))
    for name, measured in rows.items():
        if measured:
            print(json.dumps({"engine": name, "backwards": len(measured), **median_row(measured)}))


if __name__ == "__main__":
    main()
