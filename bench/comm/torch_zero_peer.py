#!/usr/bin/env python3
"""PyTorch peer for the reducer's sharded (ZeRO-1) mode: the same gradient sets as
1-D float32 CPU parameters (filled with 0.5) of a module wrapped in
DistributedDataParallel (gloo, bucket_cap_mb=25) and optimized by
torch.distributed.optim.ZeroRedundancyOptimizer (optimizer_class=torch.optim.SGD),
one process per rank.

  synced  forward (sum of every parameter times a 1-element input) + backward (DDP
          all-reduces the gradients) + zero.step() (SGD on this rank's partition,
          then every partition is broadcast from its owner)
  local   the same inside ddp.no_sync() with zero.optim.step() instead of zero.step():
          the local SGD on this rank's partition only, no communication
  comm_us median(synced) - median(local): the communication cost of a ZeRO step

Each step is timed with time.perf_counter after a barrier (warm-up steps first);
rank 0 prints its medians, one JSON line per set. Note that torch's ZeRO-1
all-reduces every gradient and then broadcasts the parameters, where gradcomm
reduce-scatters the gradients and all-gathers the parameters. Each rank uses
cpu_count // world intra-op threads (at least 1).

Run on any machine (CPU only), it spawns its own ranks:
    /work/venv-torch/bin/python bench/comm/torch_zero_peer.py --world 2
  [--sets resnet50,gpt2_medium] [--iters 20] [--warmup 3] [--lr 0.001]
or under torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set; --world ignored):
    torchrun --nproc-per-node 2 bench/comm/torch_zero_peer.py
gpt2_medium (355 M elements, 1.4 GB a copy) peaks near 5 GB per rank (parameters,
gradients, DDP buckets, gloo buffers): about 10 GB at --world 2, 20 GB at --world 4.
"""
import argparse
import gc
import json
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "kernels"))
from torch_kernels_peer import SETS  # noqa: E402  (the shared gradient sets; CPU-safe)


class Params(torch.nn.Module):
    def __init__(self, sizes):
        super().__init__()
        self.ps = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.full((n,), 0.5)) for n in sizes])

    def forward(self, x):  # DDP needs an input; x is a 1-element tensor
        return sum(p.sum() for p in self.ps) * x.sum()


def median_us(fn, iters, warmup):
    """Median of `iters` wall-clock timings of fn() in microseconds, a barrier before each."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        dist.barrier()
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def bench_set(set_name, args, rank, world):
    sizes = SETS[set_name]
    model = Params(sizes)
    ddp = DDP(model, bucket_cap_mb=25)
    zero = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.SGD, lr=args.lr)
    one = torch.ones(1)

    def synced():
        ddp.zero_grad(set_to_none=False)
        ddp(one).backward()
        zero.step()

    def local():
        with ddp.no_sync():
            ddp.zero_grad(set_to_none=False)
            ddp(one).backward()
            zero.optim.step()

    step_us = median_us(synced, args.iters, args.warmup)
    local_us = median_us(local, args.iters, args.warmup)
    if rank == 0:
        print(json.dumps({
            "peer": "torch_zero", "torch": torch.__version__, "backend": "gloo", "set": set_name,
            "world": world, "threads": torch.get_num_threads(), "tensors": len(sizes),
            "elements": sum(sizes), "step_us": step_us, "local_step_us": local_us,
            "comm_us": step_us - local_us, "iters": args.iters,
        }), flush=True)
    dist.barrier()
    del zero, ddp, model, one
    gc.collect()


def worker(rank, world, args):
    if rank is None:  # under torchrun: everything comes from the environment
        dist.init_process_group("gloo")
    else:
        dist.init_process_group("gloo", rank=rank, world_size=world)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    for set_name in args.sets:
        bench_set(set_name, args, rank, world)
    dist.destroy_process_group()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--world", type=int, default=2, choices=(2, 3, 4))
    parser.add_argument("--sets", default="resnet50,gpt2_medium")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()
    args.sets = [s for s in args.sets.split(",") if s]
    unknown = [s for s in args.sets if s not in SETS]
    if unknown:
        parser.error(f"unknown set(s) {unknown}; known: {sorted(SETS)}")
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        worker(None, None, args)
        return
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(free_port())
    mp.spawn(worker, args=(args.world, args), nprocs=args.world)


if __name__ == "__main__":
    main()
