#!/usr/bin/env python3
"""One rank of the straggler lab (issue 47): gradcomm.torch.DistributedDataParallel
on the lab's MLP, a small transformer or an MLP with BatchNorm (whose buffers the
wrapper broadcasts before each forward: a meeting of the ranks before backward), with one rank made late on purpose,
and what the straggler report said, window by window.

Run under tools/netlab (bench/netlab/stragglers.sh runs every scenario):
    tools/netlab run --ranks 4 --rate 1gbit -- python bench/netlab/straggler_lab.py \
        --model mlp --late-rank 2 --late-phase backward --late-from 10 --steps 40 --out DIR
    tools/netlab run --ranks 4 --rate 1gbit --slow 3=250mbit -- python ... --late-phase none ...

--late-phase: backward (a gradient hook sleeps), data (the batch is "loaded"
--late-ms late, before forward), optimizer (a pre-step hook sleeps), none. From
step --late-from on, rank --late-rank sleeps --late-ms in that phase. A slow
link is the lab's (--slow), not this program's.

--overhead N: no late rank; two wrappers over two copies of the model, one with
attribution on (GRADCOMM_STRAGGLER_WINDOW=10) and one off (0), run in rotating
blocks of N steps (--steps blocks each): the ratio of their median steps is its
cost.

Writes DIR/rankR.json: the step times and every window's verdict.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wire_train import build_model, make_batches, SHAPES  # noqa: E402 - the lab's MLP and its data

import gradcomm  # noqa: E402
import gradcomm.torch as gct  # noqa: E402


class SmallTransformer(torch.nn.Module):
    """A two-layer encoder (d_model 128, 4 heads) over 32 tokens of a 1000-word
    vocabulary, classifying into 10: ~0.6 M parameters."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(1000, 128)
        layer = torch.nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = torch.nn.Linear(128, 10)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)).mean(dim=1))


def bn_mlp():
    """An MLP with BatchNorm (1.6 M parameters, on the MLP's data): the wrapper
    broadcasts its buffers before every forward, where the ranks meet."""
    nn = torch.nn
    return nn.Sequential(nn.Linear(1024, 1024), nn.BatchNorm1d(1024), nn.ReLU(), nn.Linear(1024, 512),
                         nn.BatchNorm1d(512), nn.ReLU(), nn.Linear(512, 10))


def transformer_batches(rank, n, batch=16):
    out = []
    for s in range(n):
        g = torch.Generator().manual_seed(1_000_003 * rank + s)
        y = torch.randint(0, 10, (batch,), generator=g)
        tokens = (torch.randint(0, 100, (batch, 32), generator=g) + 100 * y[:, None]) % 1000
        out.append((tokens, y))
    return out


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=("mlp", "transformer", "bn_mlp"), default="mlp")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--late-rank", type=int, default=-1)
    p.add_argument("--late-phase", choices=("none", "backward", "data", "optimizer"), default="none")
    p.add_argument("--late-ms", type=float, default=200)
    p.add_argument("--late-from", type=int, default=10, help="the first synced step (1-based) made late")
    p.add_argument("--overhead", type=int, default=0, metavar="N", help="on/off blocks of N steps instead")
    p.add_argument("--compression", default=None, help="the wrapper's compression (int8, powersgd)")
    p.add_argument("--out", required=True)
    return p.parse_args()


def build(model_name):
    torch.manual_seed(0)
    if model_name == "transformer":
        return SmallTransformer()
    if model_name == "bn_mlp":
        return bn_mlp()
    return build_model("mlp")


def wrapper(module, comm, a, window=None):
    if window is not None:
        os.environ["GRADCOMM_STRAGGLER_WINDOW"] = str(window)  # read when the reducer is made
    try:
        return gct.DistributedDataParallel(module, comm, compression=a.compression)
    finally:
        if window is not None:
            os.environ.pop("GRADCOMM_STRAGGLER_WINDOW", None)


def main():
    a = parse_args()
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    comm = gradcomm.init(rank, world, master_addr=os.environ["MASTER_ADDR"],
                         master_port=int(os.environ["MASTER_PORT"]) + 1, device="cpu", timeout=300)
    n_batches = 64
    batches = (transformer_batches(rank, n_batches) if a.model == "transformer"
               else make_batches("mlp", rank, n_batches, SHAPES["mlp"]["batch"]))  # bn_mlp too
    result = {"rank": rank, "world": world, "model": a.model, "transport": str(comm.transport).split(".")[-1],
              "late_rank": a.late_rank, "late_phase": a.late_phase, "late_ms": a.late_ms,
              "late_from": a.late_from, "compression": a.compression}
    late_s = a.late_ms / 1e3

    def make(window=None):
        module = build(a.model)
        model = wrapper(module, comm, a, window)
        opt = torch.optim.SGD(module.parameters(), lr=0.01, momentum=0.9)
        state = {"step": 0}
        if rank == a.late_rank and a.late_phase == "backward":
            first = next(module.parameters())  # the first layer: its gradient comes last in backward
            first.register_hook(lambda g: (time.sleep(late_s) if state["step"] >= a.late_from else None, g)[1])
        if rank == a.late_rank and a.late_phase == "optimizer":
            opt.register_step_pre_hook(lambda *_: time.sleep(late_s) if state["step"] >= a.late_from else None)
        return model, opt, state

    def step(model, opt, state):
        state["step"] += 1
        x, y = batches[state["step"] % n_batches]
        t0 = time.perf_counter()
        if rank == a.late_rank and a.late_phase == "data" and state["step"] >= a.late_from:
            time.sleep(late_s)  # the batch takes this long to arrive
        opt.zero_grad(set_to_none=False)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        return time.perf_counter() - t0

    if a.overhead:
        runs = {"on": make(10), "off": make(0)}
        times = {"on": [], "off": []}
        for block in range(a.steps):
            order = ("on", "off") if block % 2 == 0 else ("off", "on")
            for name in order:
                comm.barrier()
                for _ in range(a.overhead):
                    times[name].append(step(*runs[name]))
        result["overhead"] = {k: {"median_s": statistics.median(v), "steps": len(v)} for k, v in times.items()}
        result["overhead"]["ratio_on_off"] = (result["overhead"]["on"]["median_s"] /
                                              result["overhead"]["off"]["median_s"])
        report = runs["on"][0].straggler_report()
        result["named_windows"], result["windows"] = report.named_windows, report.windows
        for model, _, _ in runs.values():
            model.close()
    else:
        model, opt, state = make()
        times, windows, seen = [], [], 0
        for _ in range(a.steps):
            times.append(step(model, opt, state))
            r = model.straggler_report()
            if r.windows != seen:
                seen = r.windows
                windows.append({"first_step": r.first_step, "last_step": r.last_step, "late_rank": r.late_rank,
                                "phase": r.phase, "late_steps": r.late_steps, "window_steps": r.window_steps,
                                "late_ms": r.late_ms, "clock_offset_us": r.clock_offset_us})
        result["step_s"] = times
        result["windows"] = windows
        model.close()
        if rank == 0:
            for w in windows:
                print(f"steps {w['first_step']}-{w['last_step']}: late rank {w['late_rank']} {w['phase']} "
                      f"{w['late_ms']:.0f} ms ({w['late_steps']}/{w['window_steps']})", flush=True)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    comm.close()


if __name__ == "__main__":
    sys.exit(main())
