"""gradcomm and torch can be imported in either order (each in a fresh process):
libgradcomm must not pull in a libnccl.so.2 that torch cannot use."""
import subprocess
import sys

import pytest

pytest.importorskip("torch")


@pytest.mark.parametrize("first,second", [("gradcomm", "torch"), ("torch", "gradcomm")])
def test_import_order(first, second):
    code = f"import {first}, {second}, gradcomm.torch; import torch; print(torch.ones(2).sum().item())"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "2.0", r.stderr[-2000:]
