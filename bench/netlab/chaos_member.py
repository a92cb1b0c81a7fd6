#!/usr/bin/env python3
"""A PyTorch member of the lab's chaos run (bench/netlab/chaos.py --member torch):
the lab's MLP (bench/netlab/wire_train.py: ~11.5 M parameters, 10 Gaussian classes)
under gradcomm.torch.DistributedDataParallel(membership=...) with Adam, each step's
batch drawn from (step, rank, live world). It prints the lines that
bench/netlab/chaos_report.py reads, as examples/ft_train.c does: each generation,
a newcomer's catch-up, each committed step (--log-steps), each discarded step, a
DIVERGED line if the divergence check (every --check committed steps) finds a
member off the others, and a final line with the parameters' hash and the loss on
a fixed evaluation set."""
import argparse
import hashlib
import os
import sys
import time

import torch

import gradcomm
import gradcomm.torch as gct

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wire_train import SHAPES, build_model  # noqa: E402 - the lab's MLP and its task

p = argparse.ArgumentParser()
p.add_argument("--name", default=None, help="this member's name (the supervisor finds it by it)")
p.add_argument("--min-ranks", type=int, default=3)
p.add_argument("--steps", type=int, default=1000)
p.add_argument("--timeout", type=float, default=3)
p.add_argument("--quorum-timeout", type=float, default=1)
p.add_argument("--check", type=int, default=10)
p.add_argument("--log-steps", action="store_true")
p.add_argument("--transport", default="socket")
a = p.parse_args()
torch.set_num_threads(1)

shape, batch, separation = SHAPES["mlp"]["x"], SHAPES["mlp"]["batch"], SHAPES["mlp"]["separation"]
means = torch.randn(10, *shape, generator=torch.Generator().manual_seed(4242)) * separation


def draw(step, rank, world, n=batch):
    """The sampler recipe: a function of the step, the rank and the live world."""
    g = torch.Generator().manual_seed(step * 1_000_003 + rank * 1009 + world)
    y = torch.randint(0, 10, (n,), generator=g)
    return means[y] + torch.randn(n, *shape, generator=g), y


eval_x, eval_y = draw(10**9, 0, 0, 1024)
torch.manual_seed(1)  # every original member starts alike; newcomers receive the state anyway
net = build_model("mlp")
m = gradcomm.Membership(job_key="chaos-torch", name=a.name, min_ranks=a.min_ranks, quorum_timeout=a.quorum_timeout,
                        timeout=a.timeout, transport=a.transport)
model = gct.DistributedDataParallel(net, membership=m)
opt = torch.optim.Adam(model.parameters(), lr=1e-4)
loss = torch.tensor(0.0)
while model.committed_steps < a.steps:
    before = m.stats
    step = model.start_step(opt)
    if step.changed:
        print(f"generation {step.generation}: rank {step.rank} of {step.world_size} at step {step.index}: {m.change}",
              flush=True)
        after = m.stats
        if step.rank >= step.holders and model._step_error is None:
            received = after["state_bytes_received"] - before["state_bytes_received"]
            print(f"caught up: received {received} bytes of state from {step.holders} holder(s) in "
                  f"{after['state_sync_s'] - before['state_sync_s']:.3f} s", flush=True)
    x, y = draw(step.index, step.rank, step.world_size)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    if model.commit():
        opt.step()
        if a.log_steps:
            print(f"committed step {model.committed_steps} at {time.time():.3f}, world {step.world_size}", flush=True)
        if a.check > 0 and model.committed_steps % a.check == 0:
            try:
                report = model.check_divergence()
                if not report.agreed:
                    print(f"DIVERGED at step {model.committed_steps}: {report}", flush=True)
                    sys.exit(5)
            except gradcomm.Error as e:  # a member died during the check: the next step finds out
                print(f"the check after step {model.committed_steps} failed: {e}", flush=True)
    else:
        why = model.last_step_error or "a member failed or left: the vote said so"
        print(f"step {step.index + 1} discarded ({why})", flush=True)
    opt.zero_grad()
with torch.no_grad():
    eval_loss = torch.nn.functional.cross_entropy(net(eval_x), eval_y).item()
h = hashlib.sha256()
for t in net.parameters():
    h.update(t.detach().numpy().tobytes())
s = m.stats
print(f"rank {step.rank} of {step.world_size}: committed {model.committed_steps} steps, loss {loss.item():.6f}, "
      f"params {h.hexdigest()[:16]}, generations {s['generations']}, failures survived {s['failures_survived']}, "
      f"steps discarded {s['steps_discarded']}, recovery {s['recovery_s']:.3f} s, eval loss {eval_loss:.8f}",
      flush=True)
model.close()
m.close()
