#!/usr/bin/env python3
"""All-reduce of one large buffer over gradcomm's socket transport, f32 against
f16, from Python (2 processes on this machine): the wire halves with f16, and the
host's f16 conversions must not eat the gain. Prints rank 0's median per dtype.

    python3 bench/comm/socket_allreduce_dtype.py [--count 25200000] [--reps 8]
"""
import argparse
import socket
import subprocess
import sys
import time


def rank_main(rank, port, count, reps):
    import numpy as np

    import gradcomm
    comm = gradcomm.init(rank, 2, master_port=port, timeout=120)
    for dtype in (np.float32, np.float16):
        a = np.random.default_rng(rank).standard_normal(count).astype(dtype)
        comm.all_reduce(a, op="avg")  # warm-up
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            comm.all_reduce(a, op="avg")
            times.append((time.perf_counter() - t) * 1e3)
        if rank == 0:
            print(f"{np.dtype(dtype).name}: median {sorted(times)[reps // 2]:.1f} ms over {reps} (count {count})")
    comm.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=25_200_000)
    ap.add_argument("--reps", type=int, default=8)
    ap.add_argument("--rank", type=int)
    ap.add_argument("--port", type=int)
    args = ap.parse_args()
    if args.rank is not None:
        return rank_main(args.rank, args.port, args.count, args.reps)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [subprocess.Popen([sys.executable, __file__, "--rank", str(r), "--port", str(port), "--count",
                               str(args.count), "--reps", str(args.reps)]) for r in range(2)]
    return max(p.wait() for p in procs)


if __name__ == "__main__":
    sys.exit(main())
