#!/usr/bin/env python3
"""Data-parallel training with gradcomm.torch, launched by torchrun.

    torchrun --nproc-per-node 2 examples/torch_train.py [--steps 60] [--amp] [--powersgd | --int8]
        [--wire f32|f16|bf16] [--no-sync-every K] [--checkpoint ckpt.pt [--resume]] [--device cuda]

A small CNN learns to imitate a fixed, randomly initialized "teacher" CNN on
synthetic 16x16 images (labels = the teacher's argmax), so the loss really goes
down. gradcomm.torch.DistributedDataParallel averages the gradients during
backward like torch's DDP; the communicator comes from torchrun's environment
(comm=None). Every rank sees different data. Rank 0 prints the loss; the script
exits non-zero if the loss (averaged over the ranks) did not decrease.

  --amp            autocast (bfloat16 on CPU, float16 on CUDA) and gct.GradScaler
  --powersgd       PowerSGD gradient compression (rank 4, from synced step 10)
  --int8           the int8 wire: blockwise int8 with error feedback, ~0.26x the bytes
  --wire           dtype of the gradients on the wire (f16/bf16 halve the bytes)
  --bucket-cap-mb  bucket size in MiB (25, as torch's DDP)
  --no-sync-every  K micro-batches per optimizer step; the first K-1 run in model.no_sync()
  --checkpoint     save model, optimizer, scaler and gradcomm state at the end, one
                   file per rank (PowerSGD's error feedback differs between ranks);
                   with --resume, load them first if they exist
"""
import argparse
import contextlib
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import gradcomm.torch as gct


def make_cnn(width=16, classes=10):  # 3x16x16 images
    return nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(2 * width * 4 * 4, 64), nn.ReLU(), nn.Linear(64, classes))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=60, help="optimizer steps")
    ap.add_argument("--batch", type=int, default=64, help="samples per rank per micro-batch")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--amp", action="store_true")
    ap.add_argument("--powersgd", action="store_true")
    ap.add_argument("--int8", action="store_true", help="the int8 wire (blocks of 256, error feedback)")
    ap.add_argument("--wire", choices=("f32", "f16", "bf16"), default="f32")
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0,
                    help="bucket size (small ones show the overlap in a step trace)")
    ap.add_argument("--no-sync-every", type=int, default=1, metavar="K")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--checkpoint", metavar="PATH")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--log-every", type=int, default=10)
    args = ap.parse_args()
    if args.no_sync_every < 1 or args.steps < 2:
        ap.error("--no-sync-every must be >= 1 and --steps >= 2")

    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    device = torch.device("cpu")
    if args.device == "cuda":
        if torch.cuda.is_available():
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
            torch.cuda.set_device(device)
        elif rank == 0:
            print("CUDA is not available: training on the CPU", flush=True)
    amp_dtype = torch.float16 if device.type == "cuda" else torch.bfloat16

    torch.manual_seed(1)
    teacher = make_cnn(width=8).to(device).eval()
    torch.manual_seed(0)  # the same start on every rank (the wrapper also broadcasts rank 0's weights)
    model = gct.DistributedDataParallel(
        make_cnn().to(device), comm=None,  # comm=None: a communicator from torchrun's environment
        bucket_cap_mb=args.bucket_cap_mb, first_bucket_mb=min(1.0, args.bucket_cap_mb),
        wire_dtype={"f32": None, "f16": torch.float16, "bf16": torch.bfloat16}[args.wire],
        compression=(dict(kind="powersgd", rank=4, start_iter=10) if args.powersgd else
                     "int8" if args.int8 else None))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    scaler = gct.GradScaler(model, enabled=args.amp)  # a pass-through when disabled

    ckpt_path = None
    if args.checkpoint:
        root, ext = os.path.splitext(args.checkpoint)
        ckpt_path = f"{root}.rank{rank}{ext or '.pt'}"
    start = 0
    if args.resume and ckpt_path and os.path.exists(ckpt_path):
        ck = torch.load(ckpt_path, map_location=device, weights_only=False)
        model.module.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        if args.amp and ck["scaler"]:
            scaler.load_state_dict(ck["scaler"])
        model.load_comm_state_dict(ck["comm"])
        start = ck["step"]
    if rank == 0:
        n = sum(p.numel() for p in model.parameters())
        resumed = f", resumed at step {start}" if start else ""
        print(f"{world} ranks on {device}, {n} parameters, {model.comm}; amp={args.amp} powersgd={args.powersgd} int8={args.int8} "
              f"wire={args.wire} micro-batches/step={args.no_sync_every}{resumed}", flush=True)

    def batch(step, micro):  # different data on every rank and micro-batch
        g = torch.Generator().manual_seed(((step * 1000 + micro) * 1000 + rank) % 2**62)
        x = torch.randn(args.batch, 3, 16, 16, generator=g).to(device)
        with torch.no_grad():
            return x, teacher(x).argmax(1)

    losses, t0 = [], time.perf_counter()
    for step in range(start, start + args.steps):
        opt.zero_grad()
        total = 0.0
        for micro in range(args.no_sync_every):
            last = micro == args.no_sync_every - 1
            x, y = batch(step, micro)
            with model.no_sync() if not last else contextlib.nullcontext():
                with torch.autocast(device.type, dtype=amp_dtype, enabled=args.amp):
                    loss = F.cross_entropy(model(x), y) / args.no_sync_every
                scaler.scale(loss).backward()  # the last micro-batch's backward averages over the ranks
            total += loss.item()
        scaler.step(opt)  # skipped if the averaged gradients hold Inf/NaN (AMP)
        scaler.update()
        losses.append(total)
        if rank == 0 and ((step + 1 - start) % args.log_every == 0 or step == start):
            recent = losses[-args.log_every:]
            extra = f"  scale {scaler.get_scale():g}" if args.amp else ""
            print(f"step {step + 1:5d}  loss {sum(recent) / len(recent):.4f} (rank 0, mean of last {len(recent)})"
                  f"{extra}  {(time.perf_counter() - t0) / (step + 1 - start) * 1e3:.0f} ms/step", flush=True)

    # first and last few steps' losses, averaged over the ranks with gradcomm's own all-reduce
    k = max(1, min(10, len(losses) // 5))
    ends = torch.tensor([sum(losses[:k]) / k, sum(losses[-k:]) / k], device=device)
    model.comm.all_reduce(ends, op="avg")
    first, final = ends.tolist()

    if ckpt_path:
        torch.save({"model": model.module.state_dict(), "optimizer": opt.state_dict(),
                    "scaler": scaler.state_dict(), "comm": model.comm_state_dict(), "step": start + args.steps,
                    "args": vars(args)}, ckpt_path)
        if rank == 0:
            print(f"saved {ckpt_path} (and one file per other rank)", flush=True)
    if args.powersgd and rank == 0:
        print(f"PowerSGD compressed {model.reducer.compression_stats()['compressed_steps']} steps", flush=True)
    if args.int8 and rank == 0:
        q = model.reducer.compression_stats()
        print(f"int8 wire: {q['compressed_steps']} steps, {q['bytes_last_step']} bytes a step per rank "
              f"({q['bytes_last_step'] / max(q['f32_allreduce_bytes'], 1):.3f}x an f32 all-reduce)", flush=True)
    model.close()  # also closes the communicator it created
    if rank == 0:
        print(f"final loss {final:.4f} (started at {first:.4f})", flush=True)
    if not final < first:
        if rank == 0:
            print(f"error: the loss did not decrease ({first:.4f} -> {final:.4f})", file=sys.stderr, flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
