#!/usr/bin/env python3
"""PyTorch peer for gradcomm-powersgd-bench: DDP (world size 1, NCCL,
bucket_cap_mb=25) with torch's powerSGD_hook (rank 4, min_compression_rate 2,
error feedback, warm start) on the same gradient sets and the same values
(bench/common/grad_sets.hpp: grad_rows, lowrank_value).

  hook_us          median(step with the hook) - median(step in no_sync()): the hook's cost
  relative_error   ||approximation - gradient|| / ||gradient|| over all gradients, first compressed step
  ratio            f32 all-reduce bytes / bytes the hook sends (compressed P and Q + the rest)

Run on the GPU machine: python3 bench/comm/torch_powersgd_peer.py

  --error-steps K [--no-error-feedback] [--device cpu] [--set resnet50] [--seed S]
      instead: the relative error of each of the first K compressed steps on the
      same gradients (warm start), for gradcomm-powersgd-bench --error-steps K.
      With warm start Q converges to the gradients' top subspace, so after a step
      or two the error no longer depends on the random first Q (which differs
      between the two). --device cpu runs the hook on gloo (no GPU needed).
"""
import argparse
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "kernels"))
from torch_kernels_peer import ROWS, SETS, timed  # noqa: E402

RANK = 4


DEVICE = "cuda"


def lowrank_values(tensor, rows, cols):
    """lowrank_value() of grad_sets.hpp for a whole rows x cols tensor."""
    i = torch.arange(rows, device=DEVICE, dtype=torch.int64).unsqueeze(1)
    j = torch.arange(cols, device=DEVICE, dtype=torch.int64).unsqueeze(0)
    v = torch.zeros(rows, cols, device=DEVICE)
    for c in range(1, 5):
        v += torch.sin(0.37 * c * (i + 1 + tensor).float()) * torch.cos(0.23 * c * (j + 1).float()) / c
    mask = 0xFFFFFFFF
    h = ((i * 73856093) & mask) ^ ((j * 19349663) & mask) ^ ((tensor * 83492791) & mask)
    h = h ^ (h >> 16)
    h = (h * 0x45D9F3B) & mask
    h = h ^ (h >> 16)
    return v + 0.05 * (h.double() / 4294967296.0 * 2.0 - 1.0).float()


class Params(torch.nn.Module):
    def __init__(self, sizes, rows):
        super().__init__()
        shapes = [(r, n // r) if r else (n,) for n, r in zip(sizes, rows)]
        self.ps = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(s, device=DEVICE)) for s in shapes])
        self.targets = []
        for k, (n, r) in enumerate(zip(sizes, rows)):
            g = lowrank_values(k, r if r else 1, n // r if r else n)
            self.targets.append(g.reshape(shapes[k]))

    def forward(self, x):  # the gradient of each parameter is its target
        return sum((p * t).sum() for p, t in zip(self.ps, self.targets)) * x.sum()


def relative_error(model):
    num = sum(((p.grad.double() - t.double()) ** 2).sum().item() for p, t in zip(model.ps, model.targets))
    den = sum((t.double() ** 2).sum().item() for t in model.targets)
    return (num / den) ** 0.5


def make(name, error_feedback, start_iter, seed=0):
    sizes, rows = SETS[name], ROWS[name]
    model = Params(sizes, rows)
    ddp = DDP(model, device_ids=[0] if DEVICE == "cuda" else None, bucket_cap_mb=25)
    state = psgd.PowerSGDState(process_group=None, matrix_approximation_rank=RANK, start_powerSGD_iter=start_iter,
                               min_compression_rate=2, use_error_feedback=error_feedback, warm_start=True,
                               random_seed=seed)
    ddp.register_comm_hook(state, psgd.powerSGD_hook)
    one = torch.ones(1, device=DEVICE)

    def step():
        ddp.zero_grad(set_to_none=False)
        ddp(one).backward()

    return model, ddp, step, one


def error_steps(args):
    # start_powerSGD_iter must be >= 2 in torch; the steps before it are plain all-reduces.
    model, ddp, step, _ = make(args.set, not args.no_error_feedback, 2, args.seed)
    step(); step()
    errors = []
    for _ in range(args.error_steps):
        step()
        errors.append(relative_error(model))
    print(json.dumps({"peer": "torch_powersgd", "bench": "powersgd_error_steps", "torch": torch.__version__,
                      "set": args.set, "rank": RANK, "world": 1, "device": DEVICE,
                      "error_feedback": 0 if args.no_error_feedback else 1, "seed": args.seed,
                      "errors": errors}), flush=True)


def timing(args):
    for name in ("resnet50", "gpt2_medium"):
        sizes, rows = SETS[name], ROWS[name]
        model, ddp, step, one = make(name, True, 2)

        def step_no_sync():
            with ddp.no_sync():
                ddp.zero_grad(set_to_none=False)
                ddp(one).backward()

        step(); step()  # start_powerSGD_iter = 2: plain all-reduces
        step()          # the first compressed step
        torch.cuda.synchronize()
        err = relative_error(model)
        full = 4 * sum(sizes)
        sent = 0
        for n, r in zip(sizes, rows):
            c = n // r if r else 0
            sent += 4 * ((r + c) * RANK if r and (r + c) * RANK * 2 < r * c else n)
        synced = timed(step, 20, 3)
        local = timed(step_no_sync, 20, 3)
        print(json.dumps({
            "peer": "torch_powersgd", "torch": torch.__version__, "set": name, "rank": RANK, "world": 1,
            "step_us": synced, "no_sync_step_us": local, "hook_us": synced - local,
            "relative_error": err, "ratio": full / sent,
        }), flush=True)
        del ddp, model
        torch.cuda.empty_cache()


def main():
    global DEVICE
    parser = argparse.ArgumentParser()
    parser.add_argument("--error-steps", type=int, default=0)
    parser.add_argument("--no-error-feedback", action="store_true")
    parser.add_argument("--seed", type=int, default=0, help="PowerSGDState.random_seed (the initial Q)")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--set", default="resnet50", choices=sorted(SETS))
    args = parser.parse_args()
    DEVICE = args.device
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29563")
    if DEVICE == "cuda":
        dist.init_process_group("nccl", rank=0, world_size=1)
    else:
        dist.init_process_group("gloo", rank=0, world_size=1)
        # The hook deadlocks on gloo (its future callbacks wait on further
        # all-reduces from gloo's own worker threads). With one rank every
        # all-reduce is the identity: give the hook that, completed at once; its
        # own math is untouched.
        class Done:
            def __init__(self, tensor):
                self.fut = torch.futures.Future()
                self.fut.set_result([tensor])

            def get_future(self):
                return self.fut

        psgd.dist.all_reduce = lambda tensor, group=None, async_op=False: Done(tensor)
    if DEVICE == "cuda":
        torch.cuda.set_device(0)
    if args.error_steps > 0:
        error_steps(args)
    else:
        timing(args)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
