#!/usr/bin/env python3
"""PyTorch peer for gradcomm-perf's socket transport: torch.distributed's gloo
all-reduce (sum, float32, CPU tensors) between host processes, timed like
gradcomm-perf times a size (warm-up calls, then -n calls back to back, the mean,
rank 0's figure), over the same sizes (8 B to 128 MiB by factors of 2).

Run it as gradcomm-perf is run, one process per rank under a launcher's variables:
    examples/run_processes.sh 2 python3 bench/comm/torch_gloo_peer.py [-n 5] [-w 1]
Prints one JSON line per size from rank 0.
"""
import argparse
import json
import time

import torch
import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=5)
    parser.add_argument("-w", type=int, default=1)
    parser.add_argument("-b", type=int, default=8)
    parser.add_argument("-e", type=int, default=128 << 20)
    args = parser.parse_args()
    dist.init_process_group("gloo")  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    rank, world = dist.get_rank(), dist.get_world_size()
    size = args.b
    while size <= args.e:
        x = torch.ones(max(size // 4, 1), dtype=torch.float32)
        for _ in range(args.w):
            dist.all_reduce(x)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(args.n):
            dist.all_reduce(x)
        us = (time.perf_counter() - start) / args.n * 1e6
        dist.barrier()
        if rank == 0:
            algbw = x.numel() * 4 / us / 1e3
            print(json.dumps({"peer": "torch_gloo", "torch": torch.__version__, "world": world, "bytes": x.numel() * 4,
                              "time_us": us, "algbw": algbw, "busbw": algbw * 2 * (world - 1) / world}), flush=True)
        size *= 2
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
