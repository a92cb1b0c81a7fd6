"""What the divergence check costs a training step: two local ranks (threads) train
an MLP through gradcomm.torch.DistributedDataParallel, in rotating blocks with
divergence_check_every=1 (a check before every forward: the worst case) and 0 (off),
same model, data and steps. Prints the step medians, the check's cost per call, and
what that is per step at a period K.

    python bench/comm/divergence_cost.py [--hidden 2048] [--steps 20] [--blocks 3] [--device cpu]
"""
import argparse
import statistics
import threading
import time

import torch

import gradcomm
import gradcomm.torch as gct


def mlp(hidden, device):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(hidden, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden),
                               torch.nn.ReLU(), torch.nn.Linear(hidden, 10)).to(device)


def on_ranks(comms, fn):
    """fn(r) on a thread per rank; rank 0's list of seconds."""
    times = [[] for _ in comms]
    threads = [threading.Thread(target=fn, args=(r, times[r])) for r in range(len(comms))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return times[0]


def block(comms, every, hidden, steps, device):
    """Median ms of a training step with divergence_check_every=every."""
    def rank(r, times):
        net = mlp(hidden, device)
        model = gct.DistributedDataParallel(net, comms[r], divergence_check_every=every)
        opt = torch.optim.SGD(net.parameters(), lr=1e-3)
        x = torch.randn(32, hidden, generator=torch.Generator().manual_seed(r)).to(device)
        for s in range(steps + 2):
            t0 = time.perf_counter()
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
            if s >= 2:  # the first steps build the buckets
                times.append(time.perf_counter() - t0)
        model.close()

    return statistics.median(on_ranks(comms, rank)) * 1e3


def check_alone(comms, hidden, calls, device):
    """Median ms of model.check_divergence() itself (both ranks calling together)."""
    def rank(r, times):
        model = gct.DistributedDataParallel(mlp(hidden, device), comms[r])
        for _ in range(calls + 1):
            t0 = time.perf_counter()
            model.check_divergence()
            times.append(time.perf_counter() - t0)
        model.close()

    return statistics.median(on_ranks(comms, rank)[1:]) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--blocks", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    torch.set_num_threads(1)
    comms = gradcomm.init_local(2, args.device, timeout=120)
    params = 2 * args.hidden * args.hidden + 10 * args.hidden + 2 * args.hidden + 10
    print(f"# 2 local ranks on {args.device}, MLP of {params / 1e6:.1f} M parameters ({params * 4 / 2**20:.0f} MiB), "
          f"{args.steps} steps a block, medians of the steps")
    on, off = [], []
    for b in range(args.blocks):
        for every, out in ((1, on), (0, off)) if b % 2 == 0 else ((0, off), (1, on)):
            out.append(block(comms, every, args.hidden, args.steps, args.device))
            print(f"block {b}: divergence_check_every={every}: step {out[-1]:.2f} ms", flush=True)
    step = statistics.median(off)
    print(f"step, checked every step: {statistics.median(on):.2f} ms; off: {step:.2f} ms "
          f"(difference {statistics.median(on) - step:+.2f} ms; blocks spread {min(off):.1f}-{max(off):.1f} ms off)")
    check_ms = check_alone(comms, args.hidden, 20, args.device)
    print(f"model.check_divergence() alone: {check_ms:.2f} ms a call (median of 20), "
          f"{check_ms / step * 100:.1f}% of a step")
    for k in (10, 100, 1000):
        print(f"checked every {k} steps: {check_ms / k / step * 100:.3f}% of a step")
    for c in comms:
        c.close()


if __name__ == "__main__":
    main()
