#!/usr/bin/env python3
"""Training-step benchmark on CPU: gradcomm.torch.DistributedDataParallel against
torch.nn.parallel.DistributedDataParallel (gloo), same model, data and process
count, in one run.

A step is zero_grad + forward + backward (gradients averaged) + SGD step, timed
with time.perf_counter on every rank. Each variant first runs --warmup untimed
steps; then every round runs each variant for a block of --steps timed steps
(the order rotates from round to round), so that noise from the machine (other
jobs, frequency changes) falls on all variants alike; small blocks and many
rounds interleave more finely. The variants:
  ddp_f32      torch DDP, gloo, float32 gradients
  gc_f32       gradcomm DDP, float32 wire
  ddp_f16hook  torch DDP with default_hooks.fp16_compress_hook
  gc_f16       gradcomm DDP, wire_dtype=torch.float16
  ddp_f32_view, gc_f32_view (only if named in --variants): the same
               with gradient_as_bucket_view=True
  local        (only if named in --variants) the bare module, no communication
Prints a table (rank 0's median, p10, p90, the largest per-rank median, ratios)
and with --json PATH writes the raw per-step times and metadata.

    python3 bench/comm/torch_ddp_train_peer.py --procs 2 --model mlp [--json out.json]

The script starts its ranks itself (subprocesses of this file with --rank);
their stderr is shown prefixed with [rank R]; a failing rank fails the run.
"""
import argparse
import datetime
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

VARIANTS = ("ddp_f32", "gc_f32", "ddp_f16hook", "gc_f16")  # the default set; "local" on request
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--model", choices=("mlp", "convnet"), default="mlp")
    p.add_argument("--batch", type=int, default=32, help="samples per rank per step")
    p.add_argument("--steps", type=int, default=10, help="timed steps per variant per round (block size)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per variant before the first round")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--bucket-mb", type=float, default=25.0)
    p.add_argument("--json", metavar="PATH")
    p.add_argument("--timeout", type=float, default=1800, help="seconds before the ranks are killed")
    # set by the parent for its ranks
    p.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--ports", default="", help=argparse.SUPPRESS)
    p.add_argument("--outdir", default="", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.variants = [v for v in args.variants.split(",") if v]
    unknown = set(args.variants) - set(VARIANTS + ("local", "ddp_f32_view", "gc_f32_view"))
    if unknown or not args.variants:
        p.error(f"unknown variant(s) {sorted(unknown)}; choose from {VARIANTS + ('local',)}")
    return args


# ---- one rank -------------------------------------------------------------------------

def build_model(name, nn):
    if name == "mlp":  # 6 x Linear(2048, 2048) + head: ~25.2M parameters
        layers = [nn.Linear(2048, 2048) if i % 2 == 0 else nn.ReLU() for i in range(12)]
        return nn.Sequential(*layers, nn.Linear(2048, 10))
    # convnet on 3x32x32 images: ~2.4M parameters
    def block(i, o):
        return [nn.Conv2d(i, o, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), *block(32, 64), *block(64, 128),
                         *block(128, 128), nn.Flatten(), nn.Linear(128 * 4 * 4, 1024), nn.ReLU(),
                         nn.Linear(1024, 10))


def rank_main(args):
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    import gradcomm
    import gradcomm.torch as gct

    torch.set_num_threads(1)
    rank, world = args.rank, args.procs
    gloo_port, gc_port = map(int, args.ports.split(","))
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{gloo_port}", rank=rank, world_size=world)
    comm = gradcomm.init(rank, world, master_addr="127.0.0.1", master_port=gc_port, device="cpu", timeout=120)

    g = torch.Generator().manual_seed(1234 + rank)  # per-rank synthetic batch, reused every step
    shape = (args.batch, 2048) if args.model == "mlp" else (args.batch, 3, 32, 32)
    x, y = torch.randn(shape, generator=g), torch.randint(0, 10, (args.batch,), generator=g)

    runs = {}
    for v in args.variants:
        torch.manual_seed(0)  # every variant starts from the same weights
        module = build_model(args.model, torch.nn)
        if v == "local":
            model = module
        elif v.startswith("ddp"):
            model = torch.nn.parallel.DistributedDataParallel(module, bucket_cap_mb=args.bucket_mb,
                                                              gradient_as_bucket_view=v.endswith("_view"))
            if v == "ddp_f16hook":
                model.register_comm_hook(None, default_hooks.fp16_compress_hook)
        else:
            model = gct.DistributedDataParallel(module, comm, bucket_cap_mb=args.bucket_mb,
                                                gradient_as_bucket_view=v.endswith("_view"),
                                                wire_dtype=torch.float16 if v.startswith("gc_f16") else None)
        runs[v] = (model, torch.optim.SGD(model.parameters(), lr=1e-3))
    n_params = sum(p.numel() for p in module.parameters())

    def step(model, opt):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return (time.perf_counter() - t0) * 1e3, loss.item()

    for v in args.variants:
        for _ in range(args.warmup):
            step(*runs[v])
    times, losses = {v: [] for v in args.variants}, {}
    for r in range(args.rounds):
        k = r % len(args.variants)
        medians = []
        for v in args.variants[k:] + args.variants[:k]:
            block = [step(*runs[v]) for _ in range(args.steps)]
            times[v] += [t for t, _ in block]
            losses[v] = block[-1][1]
            medians.append(f"{v} {statistics.median(t for t, _ in block):.1f}")
        if rank == 0:
            print(f"round {r + 1}/{args.rounds} block medians (ms): {', '.join(medians)}", file=sys.stderr, flush=True)

    for v in args.variants:
        if v.startswith("gc"):
            runs[v][0].close()
    comm.close()
    dist.destroy_process_group()
    out = dict(rank=rank, times_ms=times, last_loss=losses, params=n_params, torch=torch.__version__,
               gradcomm=gradcomm.__version__, threads=torch.get_num_threads())
    with open(os.path.join(args.outdir, f"rank{rank}.json"), "w") as f:
        json.dump(out, f)


# ---- the parent ---------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def relay(rank, stream):
    for line in stream:
        sys.stderr.write(f"[rank {rank}] {line.rstrip(chr(10))}\n")
        sys.stderr.flush()


def git(*cmd):
    try:
        return subprocess.run(["git", "-C", REPO, *cmd], capture_output=True, text=True, timeout=10,
                              check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def launch(args):
    outdir = tempfile.mkdtemp(prefix="ddp_peer_")
    ports = f"{free_port()},{free_port()}"
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID")}
    env["OMP_NUM_THREADS"] = "1"
    procs, relays = [], []
    for r in range(args.procs):
        cmd = [sys.executable, os.path.abspath(__file__), *sys.argv[1:], "--rank", str(r), "--ports", ports,
               "--outdir", outdir]
        p = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
        relays.append(threading.Thread(target=relay, args=(r, p.stderr), daemon=True))
        relays[-1].start()
        procs.append(p)
    deadline, failed = time.monotonic() + args.timeout, None
    try:
        while any(p.poll() is None for p in procs):
            if failed is None:
                failed = next((r for r, p in enumerate(procs) if p.poll() not in (None, 0)), None)
            if failed is not None or time.monotonic() > deadline:
                time.sleep(5)  # let the other ranks report their side before they are stopped
                break
            time.sleep(0.2)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        for t in relays:
            t.join(timeout=2)
    bad = [(r, p.returncode) for r, p in enumerate(procs) if p.returncode != 0]
    if bad:
        why = "timed out" if failed is None and time.monotonic() > deadline else f"rank {failed} failed first"
        sys.exit(f"error: {why}; exit codes {dict(bad)} (negative: killed by signal); each rank's stderr is "
                 "above, prefixed [rank R]")
    return [json.load(open(os.path.join(outdir, f"rank{r}.json"))) for r in range(args.procs)]


def summarize(args, ranks):
    rows = {}
    for v in args.variants:
        t0 = ranks[0]["times_ms"][v]
        q = statistics.quantiles(t0, n=10) if len(t0) > 1 else [t0[0]] * 9
        rows[v] = dict(median=statistics.median(t0), p10=q[0], p90=q[-1],
                       max_rank_median=max(statistics.median(r["times_ms"][v]) for r in ranks))
    for v, row in rows.items():
        for base in ("ddp_f32",) + (("ddp_f16hook",) if "f16" in v else ()):
            if base in rows:
                row[f"vs_{base}"] = row["median"] / rows[base]["median"]
    r0 = ranks[0]
    print(f"\n{args.model}: {r0['params'] / 1e6:.2f}M params, batch {args.batch}/rank, {args.procs} procs, "
          f"{args.rounds} rounds x {args.steps} steps (+{args.warmup} warmup), load avg {os.getloadavg()[0]:.1f}; "
          f"torch {r0['torch']}, gradcomm {r0['gradcomm']}; times in ms, rank 0 unless noted")
    print(f"{'variant':12s} {'median':>8s} {'p10':>8s} {'p90':>8s} {'max-rank':>9s} {'/ddp_f32':>9s} {'/f16hook':>9s}")
    for v, row in rows.items():
        ratios = "".join(f" {row[k]:9.3f}" if k in row else f" {'-':>9s}" for k in ("vs_ddp_f32", "vs_ddp_f16hook"))
        print(f"{v:12s} {row['median']:8.1f} {row['p10']:8.1f} {row['p90']:8.1f} {row['max_rank_median']:9.1f}{ratios}")
    return rows


def main():
    args = parse_args()
    if args.rank >= 0:
        return rank_main(args)
    ranks = launch(args)
    rows = summarize(args, ranks)
    if args.json:
        meta = dict(hostname=socket.gethostname(), date=datetime.datetime.now(datetime.timezone.utc).isoformat(),
                    torch=ranks[0]["torch"], gradcomm=ranks[0]["gradcomm"], git_commit=git("rev-parse", "HEAD"),
                    git_dirty=bool(git("status", "--porcelain", "--untracked-files=no")), procs=args.procs,
                    model=args.model, params=ranks[0]["params"], batch=args.batch, steps=args.steps,
                    warmup=args.warmup, rounds=args.rounds, bucket_mb=args.bucket_mb, cpu_count=os.cpu_count(),
                    threads_per_rank=ranks[0]["threads"], python=sys.version.split()[0],
                    loadavg_1_5_15_at_end=os.getloadavg())
        with open(args.json, "w") as f:
            json.dump(dict(meta=meta, summary=rows, last_loss=ranks[0]["last_loss"],
                           times_ms={r["rank"]: r["times_ms"] for r in ranks}), f, indent=1)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
