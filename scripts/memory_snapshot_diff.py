#!/usr/bin/env python3
"""What gradd's training step holds beyond the stock engine's, and who
allocated it: reads the two allocator snapshots `gradd-bench
--memory-snapshot PREFIX` writes (PREFIX-stock.pickle, PREFIX-gradd.pickle)
and prints, per allocation site, the bytes of live blocks in each, largest
difference first, then each snapshot's memory by pool and stream.

    python3 scripts/memory_snapshot_diff.py PREFIX [--frames N]

A site is the pool (the allocator's default one, or a private pool: a CUDA
graph's), the stream and the allocation's first N C++ frames that name gradd
(else its first frames outside the allocator)."""

import argparse
import collections
import pickle

ALLOCATOR_FRAMES = ("c10::cuda::CUDACachingAllocator", "c10::CachingDeviceAllocator",
                    "CUDACachingAllocator", "c10::StorageImpl", "at::empty", "at::detail::empty",
                    "torch::CapturedTraceback", "c10::cuda::", "c10::intrusive_ptr", "??")


def site_of(segment, block, frames_kept):
    pool = segment.get("segment_pool_id", (0, 0))
    pool = "default" if tuple(pool) == (0, 0) else f"pool {tuple(pool)}"
    frames = [f.get("name", "") for f in block.get("frames", [])]
    ours = [f for f in frames if "gradd" in f]
    theirs = [f for f in frames if not f.startswith(ALLOCATOR_FRAMES)]
    chosen = (ours or theirs or ["(no stack)"])[:frames_kept]
    return f"{pool}, stream {segment.get('stream', 0):#x}: " + " <- ".join(f[:90] for f in chosen)


def live_bytes(path, frames_kept):
    with open(path, "rb") as f:
        snapshot = pickle.load(f)
    by_site = collections.Counter()
    by_pool = collections.defaultdict(lambda: [0, 0])  # reserved, allocated
    for segment in snapshot["segments"]:
        pool = tuple(segment.get("segment_pool_id", (0, 0)))
        key = ("default" if pool == (0, 0) else f"pool {pool}", segment.get("stream", 0))
        by_pool[key][0] += segment["total_size"]
        for block in segment["blocks"]:
            if block["state"] == "active_allocated":
                by_pool[key][1] += block["size"]
                by_site[site_of(segment, block, frames_kept)] += block["size"]
    return by_site, by_pool


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prefix")
    parser.add_argument("--frames", type=int, default=2)
    args = parser.parse_args()
    stock, stock_pools = live_bytes(args.prefix + "-stock.pickle", args.frames)
    gradd, gradd_pools = live_bytes(args.prefix + "-gradd.pickle", args.frames)
    mb = 1 / 2**20
    print(f"{'gradd MiB':>10} {'stock MiB':>10} {'delta':>8}  site")
    for site in sorted(set(stock) | set(gradd), key=lambda s: stock[s] - gradd[s]):
        delta = gradd[site] - stock[site]
        if abs(delta) >= 2**16:
            print(f"{gradd[site] * mb:10.1f} {stock[site] * mb:10.1f} {delta * mb:+8.1f}  {site}")
    for name, pools in (("stock", stock_pools), ("gradd", gradd_pools)):
        print(f"\n{name}: reserved / allocated MiB by pool and stream")
        for (pool, stream), (reserved, allocated) in sorted(pools.items(), key=str):
            print(f"  {pool}, stream {stream:#x}: {reserved * mb:.1f} / {allocated * mb:.1f}")


if __name__ == "__main__":
    main()
