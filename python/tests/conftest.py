"""Shared helpers: launching N ranks of tests/dist_worker.py and reading their results."""
import json
import os
import random
import socket
import subprocess
import sys
import threading

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def on_ranks(comms, fn):
    """Runs fn(rank, comm) on one thread per rank; re-raises the first error."""
    out, errors = [None] * len(comms), []

    def run(r):
        try:
            out[r] = fn(r, comms[r])
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=run, args=(r,)) for r in range(len(comms))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_port_pair():
    """A port p with p and p + 1 free, below the kernel's ephemeral range: for
    torchrun's --master-port, whose agent takes p while gradcomm's store takes
    p + 1. A port the kernel hands out (free_port) lies in the ephemeral range,
    where p + 1 can become the local end of any connection meanwhile, torchrun's
    own included (seen in CI: "rank 0 cannot listen on port 58818")."""
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    for p in random.Random().sample(range(20000, min(low, 32768) - 1), 200):
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", p))
                b.bind(("127.0.0.1", p + 1))
            return p
        except OSError:
            continue
    raise RuntimeError("no two consecutive free ports in [20000, the ephemeral range)")


def run_ranks(tmp_path, world, *args, timeout=240):
    """Runs dist_worker.py as `world` processes; returns their results by rank.
    A failing rank fails the test with every rank's output."""
    gloo, gc = free_port(), free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"):
        env.pop(var, None)
    procs = []
    for r in range(world):
        cmd = [sys.executable, os.path.join(HERE, "dist_worker.py"), "--rank", str(r), "--world", str(world),
               "--gloo-port", str(gloo), "--gc-port", str(gc), "--outdir", str(tmp_path), *map(str, args)]
        log = open(tmp_path / f"log{r}.txt", "w")
        procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), log))
    failed = []
    for r, (p, log) in enumerate(procs):
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = "timeout"
        log.close()
        if rc != 0:
            failed.append(r)
    if failed:
        logs = "\n".join(f"--- rank {r} ---\n" + (tmp_path / f"log{r}.txt").read_text()[-4000:] for r in range(world))
        pytest.fail(f"ranks {failed} failed:\n{logs}")
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world)]


def max_rel_diff(a, b):
    """The largest per-tensor relative difference, max|a - b| / max|b|, over lists
    of flattened tensors (nested lists allowed): an element near zero does not
    turn one rounding of the sum's order into a huge ratio."""
    if a and not isinstance(a[0], list):
        scale = max(max((abs(y) for y in b), default=0.0), 1e-30)
        return max((abs(x - y) for x, y in zip(a, b)), default=0.0) / scale
    assert len(a) == len(b), (len(a), len(b))
    return max((max_rel_diff(x, y) for x, y in zip(a, b)), default=0.0)


LAUNCH_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
                    "GRADCOMM_MASTER_PORT", "GRADCOMM_JOB_KEY", "GRADCOMM_TRANSPORT")


@pytest.fixture
def launcher_env(monkeypatch):
    """A world of one as a launcher would describe it (a free MASTER_PORT), for
    init_from_env and wrappers made with comm=None; undone after the test."""
    for k in LAUNCH_VARIABLES:
        monkeypatch.delenv(k, raising=False)
    for k, v in dict(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                     MASTER_PORT=str(free_port())).items():
        monkeypatch.setenv(k, v)
    return os.environ

