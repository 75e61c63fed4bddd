#!/usr/bin/env python3
"""What gradd's training step holds at its peak beyond the stock engine's,
and who allocated it: reads the two allocator snapshots `gradd-bench
--memory-snapshot PREFIX` writes (PREFIX-stock.pickle, PREFIX-gradd.pickle),
finds in each the moment its recorded steps held the most allocated bytes,
and prints, per allocation site, the bytes live then in each, largest
difference first; then each snapshot's memory at its end by pool and stream.

    python3 scripts/memory_snapshot_diff.py PREFIX [--frames N]

A site is the allocation's first N C++ frames that name gradd (else its first
frames outside the allocator), and for blocks still live at the end, the
pool (the allocator's default one, or a private pool: a CUDA graph's)."""

import argparse
import collections
import pickle

ALLOCATOR_FRAMES = ("c10::cuda::CUDACachingAllocator", "c10::CachingDeviceAllocator",
                    "CUDACachingAllocator", "c10::StorageImpl", "at::empty", "at::detail::empty",
                    "torch::CapturedTraceback", "c10::cuda::", "c10::intrusive_ptr", "??",
                    "torch::unwind", "c10::Gathered")


def site_of(frames, frames_kept, pool=""):
    names = [f.get("name", "") for f in frames or []]
    ours = [n for n in names if "gradd" in n]
    theirs = [n for n in names if not n.startswith(ALLOCATOR_FRAMES)]
    chosen = (ours or theirs or ["(no stack)"])[:frames_kept]
    return (pool + ": " if pool else "") + " <- ".join(n[:90] for n in chosen)


def peak_live(snapshot, frames_kept):
    """The live blocks, by site, when the recorded trace held the most
    allocated bytes: walked back from the end state through the trace."""
    live = {}  # address -> (bytes, site)
    for segment in snapshot["segments"]:
        for block in segment["blocks"]:
            if block["state"] == "active_allocated":
                live[block["address"]] = (block["size"], site_of(block.get("frames"), frames_kept))
    total = sum(size for size, _ in live.values())
    best_total, best = total, dict(live)
    trace = [event for device in snapshot.get("device_traces", []) for event in device]
    for event in reversed(trace):
        action, address, size = event["action"], event["addr"], event["size"]
        if action == "alloc" and address in live:
            total -= live.pop(address)[0]
        elif action == "free_requested":
            live[address] = (size, site_of(event.get("frames"), frames_kept))
            total += size
            if total > best_total:
                best_total, best = total, dict(live)
    by_site = collections.Counter()
    for size, site in best.values():
        by_site[site] += size
    return best_total, by_site


def end_pools(snapshot):
    pools = collections.defaultdict(lambda: [0, 0])  # reserved, allocated
    for segment in snapshot["segments"]:
        pool = tuple(segment.get("segment_pool_id", (0, 0)))
        # Small blocks (1 MiB or less) and large ones lie in segments of their own.
        kind = segment.get("segment_type", "?")
        key = ("default" if pool == (0, 0) else f"pool {pool}", kind, segment.get("stream", 0))
        pools[key][0] += segment["total_size"]
        pools[key][1] += sum(b["size"] for b in segment["blocks"]
                             if b["state"] == "active_allocated")
    return pools


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prefix")
    parser.add_argument("--frames", type=int, default=2)
    args = parser.parse_args()
    snapshots = {}
    for engine in ("stock", "gradd"):
        with open(f"{args.prefix}-{engine}.pickle", "rb") as f:
            snapshots[engine] = pickle.load(f)
    (stock_peak, stock), (gradd_peak, gradd) = (peak_live(snapshots[e], args.frames)
                                                for e in ("stock", "gradd"))
    mb = 1 / 2**20
    print(f"peak allocated MiB: gradd {gradd_peak * mb:.1f}, stock {stock_peak * mb:.1f}")
    print(f"{'gradd MiB':>10} {'stock MiB':>10} {'delta':>8}  site (live at each peak)")
    for site in sorted(set(stock) | set(gradd), key=lambda s: stock[s] - gradd[s]):
        delta = gradd[site] - stock[site]
        if abs(delta) >= 2**16:
            print(f"{gradd[site] * mb:10.1f} {stock[site] * mb:10.1f} {delta * mb:+8.1f}  {site}")
    for engine, snapshot in snapshots.items():
        print(f"\n{engine} at the end: reserved / allocated MiB by pool, block size and stream")
        for (pool, kind, stream), (reserved, allocated) in sorted(end_pools(snapshot).items(),
                                                                  key=str):
            print(f"  {pool}, {kind} blocks, stream {stream:#x}: "
                  f"{reserved * mb:.1f} / {allocated * mb:.1f}")


if __name__ == "__main__":
    main()
