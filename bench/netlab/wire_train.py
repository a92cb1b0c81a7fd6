#!/usr/bin/env python3
"""One rank of the wire comparison on the network lab: gradcomm's wires against
PyTorch's own answers, the same model, data, seeds and optimizer, in rotating blocks.

Run under tools/netlab (or torchrun: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT):
    tools/netlab run --ranks 2 --rate 1gbit -- python bench/netlab/wire_train.py --out DIR
bench/netlab/compare.sh runs every preset; bench/netlab/report.py turns the DIRs
into tables and plots.

Variants (each keeps its own model and optimizer for the whole run):
  ddp_f32       torch DDP (gloo), float32 gradients
  ddp_f16hook   torch DDP + default_hooks.fp16_compress_hook
  ddp_psgd4/1   torch DDP + powerSGD_hook, rank 4 / 1 (see HOOK_ORDER below)
  gc_f32        gradcomm.torch.DistributedDataParallel, float32 wire
  gc_f16        the same, wire_dtype=torch.float16
  gc_int8       the same, compression="int8" (blockwise int8 with error feedback)
  gc_fp8, gc_fp4  (only if named) compression="fp8" (e4m3) / "fp4" (e2m1, blocks of 64)
  gc_diloco, gc_diloco_int8, gc_diloco_fp4  (only if named) no per-step communication:
                the same inner optimizer on each rank's own batches, and gradcomm.torch.OuterSync
                every --sync-every steps (DiLoCo; Nesterov 0.7/0.9), its pseudo-gradients on the
                f32, int8 or fp4 wire
  gc_sdiloco, gc_sdiloco_int8, gc_sdiloco_fp4  (only if named) streaming DiLoCo: the same with
                --fragments fragments synced in turn, each sync overlapping the next --overlap
                inner steps and mixed half and half with them (OuterSync's overlap_steps, mix 0.5)
  gc_psgd4/1    the same, compression=dict(kind="powersgd", rank=4 / 1)
  gc_*_inline   (only if named) a gradcomm variant with GRADCOMM_REDUCER_HOST_THREAD=0:
                its buckets run inside the backward hook that completes them,
                as before the reducer's host thread (the before/after figure)
PowerSGD starts at step 2 on both sides (the hook's earliest with error feedback),
with min_compression_rate 2, error feedback and warm start on both.

Every round runs each variant for a block of --steps steps, the order rotating
from round to round, after a barrier; a step is zero_grad + forward + backward
(gradients averaged) + SGD step, timed with time.perf_counter. The batches are
drawn once per (rank, step) from a fixed seed, so every variant sees the same data.
Bytes on the wire are read from the rank's interface counters (NETLAB_IFNAME) around
each block: what really crossed the link, headers included.
Writes DIR/rankR.json (times, losses, bytes per block, gradcomm's step timing).
"""
import argparse
import json
import os
import re
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd

import gradcomm
import gradcomm.torch as gct

VARIANTS = ("ddp_f32", "gc_f32", "ddp_f16hook", "gc_f16", "gc_int8", "ddp_psgd4", "gc_psgd4", "ddp_psgd1",
            "gc_psgd1")
NAMED_ONLY = ("gc_fp8", "gc_fp4", "gc_diloco", "gc_diloco_int8", "gc_diloco_fp4", "gc_sdiloco", "gc_sdiloco_int8",
              "gc_sdiloco_fp4")  # run when named, not by default
PSGD_START = 2

# PowerSGD's hook on gloo: its per-bucket chain issues the P and Q all-reduces from
# gloo's completion callbacks, while the autograd thread issues the next bucket's
# first all-reduce, so two ranks can issue collectives in different orders and gloo
# pairs a P matrix with a bucket ("Received data size doesn't match expected size").
# HOOK_ORDER=wait makes each bucket's hook wait for its own chain before returning,
# so every rank issues the same sequence (the hook's compression kept, its overlap
# with backward lost); "none" runs the hook as PyTorch ships it.
HOOK_ORDER = os.environ.get("NETLAB_PSGD_HOOK_ORDER", "wait")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=("mlp", "conv", "lm"), default="mlp")
    p.add_argument("--sync-every", type=int, default=10, help="the gc_diloco variants' H (inner steps a sync)")
    p.add_argument("--fragments", type=int, default=4, help="the gc_sdiloco variants' fragments")
    p.add_argument("--overlap", type=int, help="the gc_sdiloco variants' overlap_steps (default: sync_every // "
                                               "fragments, the most)")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--steps", type=int, default=10, help="steps per variant per round (block)")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--warmup", type=int, default=2, help="untimed first steps of each variant (counted in the curve)")
    p.add_argument("--lr", type=float, help="SGD's learning rate (momentum 0.9); default: the model's")
    p.add_argument("--bucket-mb", type=float,
                   help="every variant's bucket size in MB; default: each one's own (DDP's and gradcomm's: "
                        "25 MB after a 1 MB first bucket; DDP drops the small first bucket when a size is named)")
    p.add_argument("--timeout", type=float, default=300, help="gradcomm's and gloo's collective timeout (s)")
    p.add_argument("--out", required=True, help="folder for rankR.json")
    a = p.parse_args()
    a.variants = [v for v in a.variants.split(",") if v]

    def known(v):  # a variant, "_inline" after a gradcomm one, then "@MB": its own bucket size
        v, at, mb = v.partition("@")
        if at and not (re.fullmatch(r"\d+(\.\d+)?", mb) and float(mb) > 0):
            return False
        known_names = VARIANTS + NAMED_ONLY
        return v in known_names or (v.endswith("_inline") and v[:-7] in known_names and v.startswith("gc_"))
    bad = {v for v in a.variants if not known(v)}
    if bad or not a.variants:
        p.error(f"unknown variant(s) {sorted(bad)}; choose from {', '.join(VARIANTS + NAMED_ONLY)} "
                "(a gradcomm one may end in _inline; any may end in @MB, its own bucket size in MB)")
    return a


# ---- models and data -----------------------------------------------------------------

# mlp: ~11.5 M parameters and little compute: its f32 all-reduce at 1 Gbit (46 MB)
# takes longer than its forward and backward, the regime compression is for.
# conv: ~2.4 M parameters and much compute per parameter.
# Each model's task (separation of the class means) and SGD learning rate are
# set so that its loss falls visibly within ~60 steps, the runs' length.
# lm: a ~10.7 M-parameter causal transformer (6 layers, width 384) learning a
# synthetic language, fresh sentences every step (LM below).
SHAPES = {"mlp": dict(batch=64, x=(1024,), separation=0.2, lr=0.05),
          "conv": dict(batch=32, x=(3, 32, 32), separation=2.0, lr=0.01),
          "lm": dict(batch=8, lr=0.01)}


class LM:
    """The synthetic language: a first-order Markov chain over VOCAB tokens in which
    each token has FANOUT likely successors (fixed random choices and weights, the same
    on every rank), so the next-token loss can fall from ln(64) = 4.16 towards the
    chain's entropy; SEQ tokens a sentence."""
    VOCAB, SEQ, FANOUT, WIDTH, LAYERS = 64, 64, 4, 384, 6

    @classmethod
    def transitions(cls):
        g = torch.Generator().manual_seed(4242)
        t = torch.full((cls.VOCAB, cls.VOCAB), 1e-3)
        for a in range(cls.VOCAB):
            nxt = torch.randperm(cls.VOCAB, generator=g)[:cls.FANOUT]
            t[a, nxt] += torch.rand(cls.FANOUT, generator=g) + 0.2
        return t / t.sum(1, keepdim=True)

    @classmethod
    def sentences(cls, t, batch, g):
        x = torch.empty(batch, cls.SEQ + 1, dtype=torch.long)
        x[:, 0] = torch.randint(0, cls.VOCAB, (batch,), generator=g)
        for i in range(cls.SEQ):
            x[:, i + 1] = torch.multinomial(t[x[:, i]], 1, generator=g).squeeze(1)
        return x[:, :-1], x[:, 1:].reshape(-1)  # the model returns (batch * SEQ, VOCAB) logits

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            nn, w = torch.nn, LM.WIDTH
            self.tok = nn.Embedding(LM.VOCAB, w)
            self.pos = nn.Parameter(torch.randn(LM.SEQ, w) * 0.02)
            layer = nn.TransformerEncoderLayer(w, 6, 4 * w, dropout=0.0, batch_first=True, norm_first=True)
            self.body = nn.TransformerEncoder(layer, LM.LAYERS, enable_nested_tensor=False)
            self.head = nn.Linear(w, LM.VOCAB)
            self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(LM.SEQ), persistent=False)

        def forward(self, x):
            h = self.body(self.tok(x) + self.pos, mask=self.causal, is_causal=True)
            return self.head(h).reshape(-1, LM.VOCAB)


def build_model(name):
    nn = torch.nn
    if name == "lm":
        return LM.Net()
    if name == "mlp":
        widths = [1024, 2048, 2048, 2048, 512]
        layers = []
        for i, o in zip(widths, widths[1:]):
            layers += [nn.Linear(i, o), nn.ReLU()]
        return nn.Sequential(*layers, nn.Linear(widths[-1], 10))

    def block(i, o):
        return [nn.Conv2d(i, o, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), *block(32, 64), *block(64, 128),
                         *block(128, 128), nn.Flatten(), nn.Linear(128 * 4 * 4, 1024), nn.ReLU(),
                         nn.Linear(1024, 10))


def make_batches(model, rank, n, batch):
    """n batches for this rank, different on every rank and step: samples of 10
    Gaussian classes around fixed random means (mlp, conv: a task the loss shows
    being learned), or sentences of the synthetic language (lm)."""
    if model == "lm":
        t = LM.transitions()
        return [LM.sentences(t, batch, torch.Generator().manual_seed(1_000_003 * rank + s)) for s in range(n)]
    shape, sep = SHAPES[model]["x"], SHAPES[model]["separation"]
    means = torch.randn(10, *shape, generator=torch.Generator().manual_seed(4242)) * sep
    out = []
    for s in range(n):
        gs = torch.Generator().manual_seed(1_000_003 * rank + s)
        y = torch.randint(0, 10, (batch,), generator=gs)
        out.append((means[y] + torch.randn(batch, *shape, generator=gs), y))
    return out


# ---- the variants -------------------------------------------------------------------------

def psgd_hook_state(rank):
    return psgd.PowerSGDState(process_group=None, matrix_approximation_rank=rank, start_powerSGD_iter=PSGD_START,
                              min_compression_rate=2, use_error_feedback=True, warm_start=True,
                              orthogonalization_epsilon=0, random_seed=0)


def ordered(hook):
    def wait_for_own_chain(state, bucket):
        fut = hook(state, bucket)
        fut.wait()
        return fut
    return wait_for_own_chain if HOOK_ORDER == "wait" else hook


def wrap(variant, module, comm, bucket_mb):
    """The variant's wrapper of `module`; bucket_mb None: the wrapper's default buckets."""
    sized = {} if bucket_mb is None else dict(bucket_cap_mb=bucket_mb)
    if variant.startswith("ddp"):
        m = torch.nn.parallel.DistributedDataParallel(module, **sized)
        if variant == "ddp_f16hook":
            m.register_comm_hook(None, default_hooks.fp16_compress_hook)
        elif variant.startswith("ddp_psgd"):
            m.register_comm_hook(psgd_hook_state(int(variant[-1])), ordered(psgd.powerSGD_hook))
        return m
    kw = {}
    inline = variant.endswith("_inline")
    variant = variant.removesuffix("_inline")
    if variant == "gc_f16":
        kw["wire_dtype"] = torch.float16
    elif variant == "gc_int8":
        kw["compression"] = dict(kind="int8", block_size=256, error_feedback=True, start_iter=0)
    elif variant in ("gc_fp8", "gc_fp4"):
        kw["compression"] = dict(kind=variant[3:], error_feedback=True, start_iter=0)
    elif variant.startswith("gc_psgd"):
        kw["compression"] = dict(kind="powersgd", rank=int(variant[-1]), start_iter=PSGD_START,
                                 min_compression_rate=2, error_feedback=True, warm_start=True)
    if inline:  # read when the wrapper creates its reducer
        os.environ["GRADCOMM_REDUCER_HOST_THREAD"] = "0"
    try:
        return gct.DistributedDataParallel(module, comm, **sized, **kw)
    finally:
        os.environ.pop("GRADCOMM_REDUCER_HOST_THREAD", None)


def link_bytes():
    """(sent, received) bytes of this rank's lab interface; (0, 0) outside the lab."""
    dev = os.environ.get("NETLAB_IFNAME")
    if not dev:
        return 0, 0
    base = f"/sys/class/net/{dev}/statistics"
    with open(f"{base}/tx_bytes") as t, open(f"{base}/rx_bytes") as r:
        return int(t.read()), int(r.read())


def main():
    a = parse_args()
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    dist.init_process_group("gloo", init_method=f"tcp://{addr}:{port}", rank=rank, world_size=world,
                            timeout=__import__("datetime").timedelta(seconds=a.timeout))
    # tools/netlab sets GRADCOMM_TRANSPORT=socket: its ranks share this host, and shm would bypass the links.
    comm = gradcomm.init(rank, world, master_addr=addr, master_port=port + 1, device="cpu", timeout=a.timeout)

    if a.lr is None:
        a.lr = SHAPES[a.model]["lr"]
    total = a.warmup + a.rounds * a.steps
    batches = make_batches(a.model, rank, total, SHAPES[a.model]["batch"])
    runs = {}
    for v in a.variants:
        torch.manual_seed(0)  # every variant starts from the same weights
        module = build_model(a.model)
        base, _, mb = v.partition("@")
        outer = None
        if base.startswith(("gc_diloco", "gc_sdiloco")):  # local inner steps, an outer sync every a.sync_every
            model = module
            streaming = base.startswith("gc_sdiloco")
            wire = base.removeprefix("gc_sdiloco" if streaming else "gc_diloco").lstrip("_") or None
            stream_options = dict(fragments=a.fragments, mix=0.5,
                                  overlap_steps=a.overlap if a.overlap is not None else a.sync_every // a.fragments)
            outer = gct.OuterSync(module, comm, sync_every=a.sync_every, compression=wire,
                                  bucket_cap_mb=float(mb) if mb else (a.bucket_mb or 25.0),
                                  **(stream_options if streaming else {}))
        else:
            model = wrap(base, module, comm, float(mb) if mb else a.bucket_mb)
        runs[v] = dict(model=model, outer=outer, opt=torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9),
                       step=0, times_ms=[], losses=[], blocks=[], timing=[])
    n_params = sum(p.numel() for p in module.parameters())

    def step(r):
        x, y = batches[r["step"]]
        t0 = time.perf_counter()
        r["opt"].zero_grad()
        loss = torch.nn.functional.cross_entropy(r["model"](x), y)
        loss.backward()
        r["opt"].step()
        if r["outer"] is not None:
            r["outer"].step()
        r["times_ms"].append((time.perf_counter() - t0) * 1e3)
        r["losses"].append(loss.item())
        r["step"] += 1

    def block(v, n):
        r = runs[v]
        dist.barrier()
        tx0, rx0 = link_bytes()
        for _ in range(n):
            step(r)
        tx1, rx1 = link_bytes()
        r["blocks"].append(dict(steps=n, tx_bytes=tx1 - tx0, rx_bytes=rx1 - rx0))
        if v.startswith("gc") and r["outer"] is None:
            t = r["model"].reducer.step_timing()
            r["timing"].append({k: getattr(t, k) for k in ("step_us", "backward_us", "comm_us",
                                                           "overlapped_comm_us", "overlap")})

    for v in a.variants:
        block(v, a.warmup)
    for k in range(a.rounds):
        order = a.variants[k % len(a.variants):] + a.variants[:k % len(a.variants)]
        for v in order:
            block(v, a.steps)
        if rank == 0:
            med = ", ".join(f"{v} {statistics.median(runs[v]['times_ms'][-a.steps:]):.0f}" for v in a.variants)
            print(f"round {k + 1}/{a.rounds} block medians (ms): {med}", flush=True)

    for v in a.variants:
        if runs[v]["outer"] is not None:
            runs[v]["outer"].close()
        elif v.startswith("gc"):
            t = runs[v]["model"].bucket_autotune()
            runs[v]["bucket_autotune"] = {k: getattr(t, k) for k in t.__fields__}
            runs[v]["model"].close()
    comm.close()
    dist.destroy_process_group()
    os.makedirs(a.out, exist_ok=True)
    keep = ("times_ms", "losses", "blocks", "timing")
    doc = dict(rank=rank, world=world, model=a.model, params=n_params, batch=SHAPES[a.model]["batch"],
               lr=a.lr, warmup=a.warmup, steps=a.steps, rounds=a.rounds, bucket_mb=a.bucket_mb,
               sync_every=a.sync_every, fragments=a.fragments, overlap=a.overlap,
               psgd_hook_order=HOOK_ORDER, rate_bits=int(os.environ.get("NETLAB_RATE_BITS", 0)),
               torch=torch.__version__, gradcomm=gradcomm.__version__, threads=torch.get_num_threads(),
               variants={v: {k: runs[v][k] for k in keep + ("bucket_autotune",) if k in runs[v]}
                         for v in a.variants})
    with open(os.path.join(a.out, f"rank{rank}.json"), "w") as f:
        json.dump(doc, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
