"""A member of a fault-tolerant Lightning job (test_lightning.py): a Trainer of its
own with gradcomm.lightning.FaultTolerantStrategy, an MLP learning a teacher's
labels from fresh samples (its own stream), SGD with momentum and a step LR
schedule. --die S:R: the member that is rank R of the first generation SIGKILLs
itself in the training step of job step S. --final-world N: go on past --steps
until N members train (every member stops at the same step). Prints one JSON line
at the end."""
import argparse
import hashlib
import json
import os
import signal

import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset

import lightning.pytorch as pl

from gradcomm.lightning import FaultTolerantStrategy

p = argparse.ArgumentParser()
p.add_argument("--store", required=True)
p.add_argument("--steps", type=int, default=40)
p.add_argument("--min-ranks", type=int, default=3)
p.add_argument("--die", default="")
p.add_argument("--seed", type=int, default=0)
p.add_argument("--fp16", action="store_true", help='precision="16-mixed" with a GradScaler (on the CPU too)')
p.add_argument("--final-world", type=int, default=0, help="go on past --steps until the live world is this large")
a = p.parse_args()
die_step, die_rank = map(int, a.die.split(":")) if a.die else (-1, -1)
torch.set_num_threads(1)


class Teacher(IterableDataset):
    def __iter__(self):
        g = torch.Generator().manual_seed(1000 + a.seed)  # this member's own stream
        w = torch.randn(4, 16, generator=torch.Generator().manual_seed(5)) / 4
        while True:
            x = torch.randn(16, 16, generator=g)
            yield x, x @ w.T


class Module(pl.LightningModule):
    def __init__(self):
        super().__init__()
        torch.manual_seed(a.seed)  # each member its own start: rank 0's wins
        self.net = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))

    def training_step(self, batch, batch_idx):
        step = self.trainer.strategy.step
        if step.generation == 1 and step.index == die_step and step.rank == die_rank:
            os.kill(os.getpid(), signal.SIGKILL)
        x, y = batch
        loss = ((self.net(x[0]) - y[0]) ** 2).mean()
        self.log("train_loss", loss)
        self.last_loss = float(loss)
        return loss

    def configure_optimizers(self):
        opt = torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)
        return [opt], [{"scheduler": sched, "interval": "step"}]


class StopTogether(pl.Callback):
    """Stops once the job committed --steps with --final-world members: every member
    sees the same committed steps and world, so all stop after the same step."""

    def on_train_batch_end(self, trainer, *args):
        s = trainer.strategy
        if s.committed_steps >= a.steps and s.step.world_size >= a.final_world:
            trainer.should_stop = True


plugins = []
if a.fp16:  # Lightning gives the CPU no scaler for "16-mixed"; this is the GPU's setup
    from lightning.pytorch.plugins import MixedPrecision
    plugins.append(MixedPrecision("16-mixed", "cpu", scaler=torch.amp.GradScaler("cpu", init_scale=2.0 ** 12,
                                                                                 growth_interval=3)))
module = Module()
strategy = FaultTolerantStrategy(store=a.store, job_key="pytest-lightning-ft", min_ranks=a.min_ranks, timeout=20)
trainer = pl.Trainer(max_steps=-1 if a.final_world else a.steps, accelerator="cpu", devices=1, strategy=strategy,
                     logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                     callbacks=[StopTogether()] if a.final_world else [], plugins=plugins)
trainer.fit(module, DataLoader(Teacher(), batch_size=1))
momentum = [s["momentum_buffer"] for s in trainer.optimizers[0].state.values()]
h = hashlib.sha256()
for t in list(module.net.parameters()) + momentum:
    h.update(t.detach().contiguous().numpy().tobytes())
print(json.dumps({"global_step": trainer.global_step, "committed": strategy.committed_steps,
                  "state": h.hexdigest()[:16], "lr": trainer.optimizers[0].param_groups[0]["lr"],
                  "loss": module.last_loss, "scale": getattr(trainer.precision_plugin, "scaler", None) and
                  trainer.precision_plugin.scaler.get_scale(),
                  "scaler": type(getattr(trainer.precision_plugin, "scaler", None)).__module__, "world": strategy.step.world_size, "stats": strategy.stats}),
      flush=True)
