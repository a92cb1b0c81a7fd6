"""A member of a fault-tolerant job (test_membership.py): trains y = w.x by SGD on
numpy data of its own, averaging gradients over the live world through
gradcomm.Membership; every step is voted on. --die S:R: the process that is rank
R of the first generation SIGKILLs itself when the job has committed S steps.
Prints one JSON line at the end: its rank, steps, parameter hash and counters."""
import argparse
import hashlib
import json
import os
import signal
import time

import numpy as np

import gradcomm

p = argparse.ArgumentParser()
p.add_argument("--store", required=True)
p.add_argument("--steps", type=int, default=60)
p.add_argument("--min-ranks", type=int, default=3)
p.add_argument("--die", default="")
p.add_argument("--step-ms", type=float, default=2)
a = p.parse_args()
die_step, die_rank = map(int, a.die.split(":")) if a.die else (-1, -1)

dim, batch = 32, 16
truth = np.random.default_rng(7).standard_normal(dim).astype(np.float32)
w = np.zeros(dim, np.float32)
step = 0
with gradcomm.Membership(store=a.store, job_key="pytest-ft", min_ranks=a.min_ranks, timeout=20) as m:
    while step < a.steps:
        view = m.quorum()
        ok = True
        if view.changed:
            print(f"generation {view.generation}: rank {view.rank} of {view.world_size}, holders {view.holders}, "
                  f"at step {view.committed_steps}: {m.change}", flush=True)
            step = view.committed_steps
            ok = m.try_sync_state([w])
        if view.generation == 1 and step == die_step and view.rank == die_rank:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(a.step_ms / 1000)
        rng = np.random.default_rng([step, view.rank, view.world_size])
        x = rng.standard_normal((batch, dim)).astype(np.float32)
        grad = (x.T @ (x @ w - x @ truth)).astype(np.float32)
        ok = ok and m.try_(view.communicator.all_reduce, grad, op="sum")
        if m.commit(ok):
            w -= 0.01 * grad / (batch * view.world_size)
            step += 1
    print(json.dumps({"rank": view.rank, "world": view.world_size, "steps": step,
                      "params": hashlib.sha256(w.tobytes()).hexdigest()[:16], "stats": m.stats}), flush=True)
