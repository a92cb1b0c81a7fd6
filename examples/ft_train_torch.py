"""Training through failures with PyTorch (docs/fault-tolerance.md): a member of a
fault-tolerant job. An MLP with a BatchNorm learns a teacher's labels under
gradcomm.torch.DistributedDataParallel(membership=...), with Adam and a step LR
schedule; each step's batch is drawn from (step, rank, live world), the sampler
recipe. Start gradcomm-store, then each member under its own restart loop
(examples/run_fault_tolerant.sh):

    GRADCOMM_STORE=host:29400 python examples/ft_train_torch.py --min-ranks 3 --steps 500

--die S:R: the process that is rank R of the first generation SIGKILLs itself in
step S's backward (its last layer's gradient hook), to see the others go on.
--final-world N: go on past --steps until N members train. Ends with a line
"rank R of W: committed N steps, loss L, params HASH, ..." and, with --json, one
JSON line (hashes of the parameters, buffers and optimizer state, the counters).
"""
import argparse
import hashlib
import json
import os
import signal

import torch

import gradcomm
import gradcomm.torch as gct

p = argparse.ArgumentParser()
p.add_argument("--store", default=None, help="host:port of gradcomm-store (default: GRADCOMM_STORE)")
p.add_argument("--steps", type=int, default=40)
p.add_argument("--min-ranks", type=int, default=3)
p.add_argument("--die", default="")
p.add_argument("--compression", default="none")
p.add_argument("--seed", type=int, default=0, help="this member's own initial weights (rank 0's win)")
p.add_argument("--final-world", type=int, default=0, help="go on past --steps until the live world is this large")
p.add_argument("--json", action="store_true", help="end with a JSON line too")
p.add_argument("--device", default="cpu", help="cpu, or cuda:0 (several members on one GPU: cuda-ipc)")
p.add_argument("--amp", action="store_true", help="autocast (bfloat16 on the CPU, float16 on a GPU) and gct.GradScaler")
a = p.parse_args()
die_step, die_rank = map(int, a.die.split(":")) if a.die else (-1, -1)

torch.manual_seed(a.seed)
torch.set_num_threads(1)
teacher = torch.nn.Linear(32, 4)
with torch.no_grad():
    g = torch.Generator().manual_seed(99)
    teacher.weight.copy_(torch.randn(4, 32, generator=g) / 32 ** 0.5)
    teacher.bias.copy_(torch.randn(4, generator=g))
net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.BatchNorm1d(64), torch.nn.ReLU(), torch.nn.Linear(64, 4))


def batch(step, rank, world, size=32):
    """The sampler recipe: a batch is a function of the step, the rank and the live
    world, so a discarded step is redrawn and the live ranks never overlap."""
    g = torch.Generator().manual_seed(step * 1_000_003 + rank * 1009 + world)
    x = torch.randn(size, 32, generator=g)
    return x.to(a.device), teacher(x).detach().to(a.device)


def digest(tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


net.to(a.device)
m = gradcomm.Membership(store=a.store, job_key="ft-train-torch", min_ranks=a.min_ranks, timeout=20, device=a.device)
model = gct.DistributedDataParallel(net, membership=m, compression=a.compression, bucket_cap_mb=0.01,
                                    first_bucket_mb=0.005)
scaler = gct.GradScaler(model, init_scale=2.0 ** 10, growth_interval=20, enabled=a.amp)  # newcomers receive its state
amp_dtype = torch.float16 if a.device.startswith("cuda") else torch.bfloat16
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=50, gamma=0.8)
first_rank = None
loss = torch.tensor(0.0)
step = None
while step is None or model.committed_steps < a.steps or step.world_size < a.final_world:
    step = model.start_step(opt, sched)
    if first_rank is None:
        first_rank = step.rank
    if step.changed:
        print(f"generation {step.generation}: rank {step.rank} of {step.world_size}, holders {step.holders}, "
              f"at step {step.index}: {m.change}", flush=True)
    x, y = batch(step.index, step.rank, step.world_size)
    with torch.autocast(a.device.split(":")[0], dtype=amp_dtype, enabled=a.amp):
        loss = torch.nn.functional.mse_loss(model(x).float(), y)
    if step.generation == 1 and step.index == die_step and step.rank == die_rank:
        model.module[3].weight.register_hook(lambda g: os.kill(os.getpid(), signal.SIGKILL))
    scaler.scale(loss).backward()
    if model.commit():  # every member, or none: only then the optimizer, scheduler and scaler step
        scaler.step(opt)
        scaler.update()
        sched.step()
    opt.zero_grad()
state = [v for s in opt.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
shared = model.reducer.compression_state(shared=True) if a.compression != "none" else b""
params = digest(net.parameters())
print(f"rank {step.rank} of {step.world_size}: committed {model.committed_steps} steps, loss {loss.item():.6f}, "
      f"params {params}, generations {m.stats['generations']}, failures survived {m.stats['failures_survived']}, "
      f"steps discarded {m.stats['steps_discarded']}, state received {m.stats['state_bytes_received']} bytes",
      flush=True)
if a.json:
    print(json.dumps({"rank": step.rank, "world": step.world_size, "steps": model.committed_steps, "params": params,
                      "buffers": digest(net.buffers()), "optimizer": digest(state), "lr": sched.get_last_lr()[0], "scale": scaler.get_scale(),
                      "shared": hashlib.sha256(shared).hexdigest()[:16], "loss": loss.item(),
                      "compression": model.reducer.compression(), "stats": m.stats}), flush=True)
model.close()
m.close()
