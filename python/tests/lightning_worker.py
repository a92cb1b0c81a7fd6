"""One Lightning run for test_lightning.py: a LightningModule trained by
Trainer(accelerator="cpu", devices=2, strategy=...) for --steps steps (from a
checkpoint with --resume), then validated and tested; rank 0 writes its parameters
and metrics to <outdir>/<name>.json. Lightning's launcher starts rank 1 by running
this script again."""
import argparse
import atexit
import json
import logging
import os
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import lightning.pytorch as pl

import gradcomm.lightning  # noqa: F401 - registers strategy="gradcomm"
from gradcomm.lightning import GradcommStrategy


class Module(pl.LightningModule):
    def __init__(self):
        super().__init__()
        torch.manual_seed(7)
        self.net = nn.Sequential(nn.Linear(32, 48), nn.Tanh(), nn.Linear(48, 24), nn.Tanh(), nn.Linear(24, 10))

    def loss(self, batch):
        x, y = batch
        return ((self.net(x) - y) ** 2).mean()

    late_rank = -1  # --late-rank: this rank's training steps take 60 ms longer (straggler attribution)

    def training_step(self, batch, batch_idx):
        if self.global_rank == self.late_rank:
            time.sleep(0.06)
        loss = self.loss(batch)
        # sync_dist's all-reduce, before backward, would make every rank wait there
        # for the late one and hide it from straggler attribution (docs/observability.md).
        self.log("train_loss", loss, sync_dist=self.late_rank < 0)
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self.loss(batch), sync_dist=True)

    def test_step(self, batch, batch_idx):
        self.log("test_loss", self.loss(batch), sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)


def data(n, seed):
    g = torch.Generator().manual_seed(seed)
    return DataLoader(TensorDataset(torch.randn(n, 32, generator=g), torch.randn(n, 10, generator=g)), batch_size=8)


def strategy(args):
    if args.strategy == "ddp" or (args.strategy == "gradcomm" and not args.option):
        return args.strategy  # by name, as a user writes it
    options = {}
    for o in args.option:
        key, value = o.split("=", 1)
        options[key] = json.loads(value)
    return GradcommStrategy(**options)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--strategy", required=True)
    ap.add_argument("--option", action="append", default=[])  # key=json value, GradcommStrategy's options
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--save", default="")  # a checkpoint written after the steps
    ap.add_argument("--resume", default="")  # the checkpoint to start from
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--gpu", action="store_true")  # one process on cuda:0 (the GPU pass) instead of 2 CPU processes
    ap.add_argument("--fp16", action="store_true")  # precision="16-mixed" with a GradScaler (on the CPU too)
    ap.add_argument("--late-rank", type=int, default=-1)
    ap.add_argument("--exit-probe", default="")  # a file: whether torch.distributed was still open last at exit
    args = ap.parse_args()
    if args.exit_probe:  # registered first, so it runs after every later atexit function
        atexit.register(lambda: open(f"{args.exit_probe}.{os.getpid()}", "w").write(
            str(torch.distributed.is_initialized())))
    torch.set_num_threads(1)
    lines = []  # what the strategy logs about stragglers

    class Keep(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())
    logging.getLogger("gradcomm.lightning").addHandler(Keep())
    model = Module()
    model.late_rank = args.late_rank
    plugins = []
    if args.fp16:  # Lightning gives the CPU no scaler for "16-mixed"; this is the GPU's setup
        from lightning.pytorch.plugins import MixedPrecision
        device = "cuda" if args.gpu else "cpu"
        plugins.append(MixedPrecision("16-mixed", device, scaler=torch.amp.GradScaler(device, init_scale=2.0 ** 12,
                                                                                      growth_interval=3)))
    trainer = pl.Trainer(accelerator="gpu" if args.gpu else "cpu", devices=1 if args.gpu else 2, strategy=strategy(args), max_steps=args.steps, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         num_sanity_val_steps=0, plugins=plugins)
    trainer.fit(model, data(160, 1), data(64, 2), ckpt_path=args.resume or None)
    # Every rank's own parameters after fit (validate and test broadcast rank 0's module
    # state to every rank, as Lightning's DDP strategy does).
    with open(os.path.join(args.outdir, f"{args.name}.rank{trainer.global_rank}.params.json"), "w") as f:
        json.dump([p.detach().reshape(-1).tolist() for p in model.parameters()], f)
    if args.save:
        trainer.save_checkpoint(args.save)
    val = trainer.validate(model, data(64, 2), verbose=False)
    test = trainer.test(model, data(64, 3), verbose=False)
    if trainer.global_rank == 0:
        result = {"params": [p.detach().reshape(-1).tolist() for p in model.parameters()],
                  "val": val, "test": test, "strategy": type(trainer.strategy).__name__,
                  "scaler": type(getattr(trainer.precision_plugin, "scaler", None)).__module__,
                  "scale": getattr(getattr(trainer.precision_plugin, "scaler", None), "get_scale", lambda: None)(),
                  "steps": trainer.global_step, "straggler_lines": lines}
        with open(os.path.join(args.outdir, f"{args.name}.json"), "w") as f:
            json.dump(result, f)
    # Lightning's DDP leaves torch.distributed's group open (a Trainer may fit again);
    # left to the interpreter's exit, gloo's worker threads can still be releasing a
    # tensor while Python finalizes and the process aborts ("terminate called without
    # an active exception" from ProcessGroupGloo::runLoop): 3 runs in 20 of this peer
    # under torchrun on a 2-core machine. The peer closes it here, as torch asks;
    # gradcomm's strategy closes it at exit itself (checked by --exit-probe).
    if args.strategy == "ddp" and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
