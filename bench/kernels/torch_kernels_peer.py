#!/usr/bin/env python3
"""PyTorch peer for bench/kernels: the same gradient sets and operations, timed
with CUDA events (median of many repeats), printed as one JSON object per line.

  unscale          torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale)
  pack_f16         torch.cat([g.flatten() for g in grads]).mul_(1/8).to(torch.float16)  (PyTorch's way to bucket)
  foreach_mul      torch._foreach_mul_(grads, s)
  unpack_epilogue  torch._foreach_add_(grads, torch.split(bucket.float().mul_(s), sizes))  (unflatten + scale + accumulate)
  l2norm           torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
  copy_baseline    bucket.copy_(flat f16 view of the same bytes): the device's copy bandwidth

Run on the GPU machine: python3 bench/kernels/torch_kernels_peer.py
"""
import json
import sys

import torch


# (elements, first dimension) per tensor, as bench/common/grad_sets.hpp: the first
# dimension is 0 for vectors (PowerSGD views a gradient as rows x count/rows).
def resnet50_shapes():
    s = []
    conv = lambda i, o, k: s.append((i * o * k * k, o))
    def bn(c):
        s.extend([(c, 0), (c, 0)])
    conv(3, 64, 7); bn(64)
    cin = 64
    for mid, blocks in zip((64, 128, 256, 512), (3, 4, 6, 3)):
        out = mid * 4
        for b in range(blocks):
            conv(cin, mid, 1); bn(mid); conv(mid, mid, 3); bn(mid); conv(mid, out, 1); bn(out)
            if b == 0:
                conv(cin, out, 1); bn(out)
            cin = out
    s.extend([(2048 * 1000, 1000), (1000, 0)])
    return s


def gpt2_medium_shapes():
    d = 1024
    s = [(50257 * d, 50257), (1024 * d, 1024)]
    for _ in range(24):
        s.extend([(d, 0), (d, 0), (d * 3 * d, d), (3 * d, 0), (d * d, d), (d, 0), (d, 0), (d, 0),
                  (d * 4 * d, d), (4 * d, 0), (4 * d * d, 4 * d), (d, 0)])
    s.extend([(d, 0), (d, 0)])
    return s


def tiny_shapes():
    return [(64 + (k * 37) % 128, 0) for k in range(5000)]


SHAPES = {"resnet50": resnet50_shapes(), "gpt2_medium": gpt2_medium_shapes(), "tiny": tiny_shapes()}
SETS = {name: [n for n, _ in shapes] for name, shapes in SHAPES.items()}
ROWS = {name: [r for _, r in shapes] for name, shapes in SHAPES.items()}


def timed(fn, repeats, warmup=1):
    """Median of `repeats` CUDA-event timings of fn(), in microseconds."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e3)  # us
    times.sort()
    return times[len(times) // 2]


def main():
    if not torch.cuda.is_available():
        print(json.dumps({"peer": "torch", "error": "no CUDA device"}))
        return 1
    dev = torch.device("cuda:0")
    torch.manual_seed(0)
    for name, sizes in SETS.items():
        elements = sum(sizes)
        grads = [torch.empty(n, device=dev).uniform_(-1, 1) for n in sizes]
        found_inf = torch.zeros(1, device=dev)
        inv_scale = torch.full((1,), 1.0 / 65536, device=dev)
        bucket = torch.empty(elements, device=dev, dtype=torch.float16).uniform_(-1, 1)
        repeats = 20 if name == "gpt2_medium" else 100
        ops = {
            "unscale": (lambda: torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale), 8),
            "foreach_mul": (lambda: torch._foreach_mul_(grads, 1.0), 8),
            "pack_f16": (lambda: torch.cat([g.flatten() for g in grads]).mul_(0.125).to(torch.float16), 6),
            "unpack_epilogue": (lambda: torch._foreach_add_(grads, list(torch.split(bucket.float().mul_(0.0625), sizes))), 10),
            "l2norm": (lambda: torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads))), 4),
        }
        flat = torch.empty(elements, device=dev, dtype=torch.float16)
        ops["copy_baseline"] = (lambda: flat.copy_(bucket), 4)
        for op, (fn, bytes_per_element) in ops.items():
            us = timed(fn, repeats)
            print(json.dumps({"peer": "torch", "torch": torch.__version__, "set": name, "op": op,
                              "tensors": len(sizes), "elements": elements, "median_us": us,
                              "GB/s": bytes_per_element * elements / us / 1e3}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
