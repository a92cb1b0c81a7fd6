"""gradcomm and torch can be imported in either order (each in a fresh process):
libgradcomm must not pull in a libnccl.so.2 that torch cannot use. NCCL is loaded
lazily (comm/nccl/nccl_library.hpp), preferring the nvidia-nccl-cu* package beside
the gradcomm wheel, so asking for it before importing torch is safe too."""
import subprocess
import sys

import pytest

pytest.importorskip("torch")


NCCL_FIRST = "import gradcomm\ntry:\n    gradcomm.nccl_version()\nexcept gradcomm.NotSupportedError:\n    pass\n"


@pytest.mark.parametrize("prelude,first,second", [("", "gradcomm", "torch"), ("", "torch", "gradcomm"),
                                                   (NCCL_FIRST, "gradcomm", "torch")])
def test_import_order(prelude, first, second):
    code = prelude + f"import {first}, {second}, gradcomm.torch; import torch; print(torch.ones(2).sum().item())"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "2.0", r.stderr[-2000:]
