"""examples/torch_train.py under the real torchrun (2 processes, CPU): the loss
must go down (the script exits 1 otherwise), with AMP and PowerSGD too."""
import os
import subprocess
import sys

import pytest

from conftest import free_port_pair

pytest.importorskip("torch")

SOURCE = os.environ.get("GRADCOMM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(SOURCE, "examples", "torch_train.py")


@pytest.mark.parametrize("flags", [[], ["--amp", "--powersgd", "--no-sync-every", "2"], ["--int8", "--amp"]],
                         ids=["f32", "amp-powersgd", "int8-amp"])
def test_torch_train_example_under_torchrun(flags):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env["OMP_NUM_THREADS"] = "1"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(free_port_pair()),
           EXAMPLE, "--steps", "40", *flags]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "final loss" in r.stdout
