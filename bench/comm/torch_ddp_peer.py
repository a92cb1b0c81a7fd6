#!/usr/bin/env python3
"""PyTorch DDP peer for gradcomm-reducer-bench: the same gradient sets as
parameters of a module wrapped in DistributedDataParallel (world size 1, NCCL,
bucket_cap_mb=25), with and without the fp16 compression hook and with
gradient_as_bucket_view.

DDP's communication cost of one step = median(step with sync) - median(step in
no_sync()), where a step is forward (sum of every parameter) + backward, timed
with CUDA events. gradcomm's reducer step (no compute) is compared against it.
One JSON object per line.

Run on the GPU machine: python3 bench/comm/torch_ddp_peer.py
"""
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "kernels"))
from torch_kernels_peer import SETS, timed  # noqa: E402  (the shared gradient sets)


class Params(torch.nn.Module):
    def __init__(self, sizes):
        super().__init__()
        self.ps = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.full((n,), 0.5, device="cuda")) for n in sizes])

    def forward(self, x):  # DDP needs an input; x is a 1-element tensor
        return sum(p.sum() for p in self.ps) * x.sum()


def main():
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29561")
    dist.init_process_group("nccl", rank=0, world_size=1)
    torch.cuda.set_device(0)
    for set_name in ("resnet50", "gpt2_medium"):
        sizes = SETS[set_name]
        for wire, view in (("same", False), ("f16", False), ("same", True)):
            model = Params(sizes)
            ddp = DDP(model, device_ids=[0], bucket_cap_mb=25, gradient_as_bucket_view=view)
            if wire == "f16":
                ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)

            one = torch.ones(1, device="cuda")

            def step():
                ddp.zero_grad(set_to_none=False)
                ddp(one).backward()

            def step_no_sync():
                with ddp.no_sync():
                    ddp.zero_grad(set_to_none=False)
                    ddp(one).backward()

            synced = timed(step, 30, 5)
            local = timed(step_no_sync, 30, 5)
            print(json.dumps({
                "peer": "torch_ddp", "torch": torch.__version__, "set": set_name, "wire": wire,
                "view": int(view), "world": 1, "tensors": len(sizes), "elements": sum(sizes),
                "step_us": synced, "no_sync_step_us": local, "comm_us": synced - local,
            }), flush=True)
            del ddp, model
            torch.cuda.empty_cache()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
