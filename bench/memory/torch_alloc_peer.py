#!/usr/bin/env python3
"""PyTorch peer for gradcomm_memory_trace_bench's _Device cases: replays the same
training-like allocation trace (written by gradcomm-training-trace) through
PyTorch's CUDA caching allocator, with its raw entry points
(torch.cuda.caching_allocator_alloc/_delete: no tensor objects), on two streams.

Reports, as one JSON object per line and per jitter:
  peak_reserved_MiB / peak_allocated_MiB / reserved_per_allocated   (the whole run)
  cold_replay_ms      the first replay (every segment from cudaMalloc)
  warm_replay_ms      median of later replays through the warm cache
  ns_per_op           warm_replay_ms per trace op (Python's call cost included:
                      compare with gradcomm's per-op time knowing that)

Run on the GPU machine: python3 bench/memory/torch_alloc_peer.py
  --trace-tool PATH   gradcomm-training-trace (default: found under build-gpu/)
  --dry-run           no GPU needed: parse the trace and replay it on a fake
                      allocator (checks the script and the trace, measures nothing)
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import time


def find_trace_tool():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for pattern in ("build-gpu/bench/memory/gradcomm-training-trace",
                    ".gpu-carry/build-gpu/bench/memory/gradcomm-training-trace",
                    "build*/bench/memory/gradcomm-training-trace"):
        hits = sorted(glob.glob(os.path.join(root, pattern)))
        if hits:
            return hits[0]
    return None


def read_trace(tool, jitter):
    text = subprocess.run([tool, "--jitter", str(jitter)], check=True, capture_output=True, text=True).stdout
    ops = []
    for line in text.splitlines():
        f = line.split()
        if f[0] == "a":
            ops.append((True, int(f[1]), int(f[2]), int(f[3])))
        elif f[0] == "f":
            ops.append((False, int(f[1]), 0, int(f[2])))
        else:
            raise ValueError(f"unexpected trace line: {line!r}")
    return ops


class FakeAllocator:
    """--dry-run: checks that every free matches a live allocation on its stream."""

    def __init__(self):
        self.live = {}
        self.next = 1

    def alloc(self, nbytes, stream):
        p = self.next
        self.next += 1
        self.live[p] = (nbytes, stream)
        return p

    def free(self, p, stream):
        _, s = self.live.pop(p)
        if s != stream:
            raise AssertionError("freed on another stream than allocated")


def replay(ops, alloc, free, streams):
    ptrs = {}
    for is_alloc, op_id, nbytes, stream in ops:
        if is_alloc:
            ptrs[op_id] = alloc(nbytes, streams[stream])
        else:
            free(ptrs.pop(op_id), streams[stream])
    if ptrs:
        raise AssertionError(f"{len(ptrs)} allocations never freed")


def run_torch(ops, warm_repeats):
    import torch

    torch.cuda.init()
    dev = torch.cuda.current_device()
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    alloc = lambda n, s: torch.cuda.caching_allocator_alloc(n, dev, s)
    free = lambda p, s: torch.cuda.caching_allocator_delete(p)
    t0 = time.perf_counter()
    replay(ops, alloc, free, streams)
    cold = time.perf_counter() - t0
    warm = []
    for _ in range(warm_repeats):
        t0 = time.perf_counter()
        replay(ops, alloc, free, streams)
        warm.append(time.perf_counter() - t0)
    stats = torch.cuda.memory_stats()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    reserved = stats["reserved_bytes.all.peak"]
    allocated = stats["allocated_bytes.all.peak"]
    return {
        "peak_reserved_MiB": reserved / 2**20,
        "peak_allocated_MiB": allocated / 2**20,
        "reserved_per_allocated": reserved / allocated,
        "reserved_per_requested": reserved / stats["requested_bytes.all.peak"],
        "upstream_allocs": stats["segment.all.allocated"],
        "cold_replay_ms": cold * 1e3,
        "warm_replay_ms": statistics.median(warm) * 1e3,
        "ns_per_op": statistics.median(warm) * 1e9 / len(ops),
        "device": torch.cuda.get_device_name(dev),
        "torch": torch.__version__,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace-tool", default=os.environ.get("GRADCOMM_TRACE_TOOL") or find_trace_tool())
    ap.add_argument("--repeats", type=int, default=10, help="warm replays (the median is reported)")
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    if not args.trace_tool or not os.access(args.trace_tool, os.X_OK):
        sys.exit("torch_alloc_peer: gradcomm-training-trace not found (build it, or pass --trace-tool)")
    for name, jitter in (("Defaults", 0.25), ("StaticShapes", 0.0)):
        ops = read_trace(args.trace_tool, jitter)
        row = {"peer": "torch_caching_allocator", "case": name, "jitter": jitter, "trace_ops": len(ops)}
        if args.dry_run:
            fake = FakeAllocator()
            replay(ops, fake.alloc, fake.free, [0, 1])
            row["dry_run"] = "trace replayed on a fake allocator; nothing measured"
        else:
            row.update(run_torch(ops, args.repeats))
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
