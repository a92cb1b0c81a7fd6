"""The plotting tools on real output: a reducer step trace (tools/gradcomm_trace_plot.py)
and gradcomm-perf -J files (tools/gradcomm_perf_plot.py) become PNG files; bad
input is refused with a message naming the file."""
import os
import subprocess
import sys

import numpy as np
import pytest

import gradcomm
from conftest import on_ranks

SOURCE = os.environ.get("GRADCOMM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("GRADCOMM_BIN_DIR")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def tool(name, *args):
    return subprocess.run([sys.executable, os.path.join(SOURCE, "tools", name), *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def traced_steps(tmp_path, world=2, steps=3):
    comms = gradcomm.init_local(world, timeout=30)
    pattern = str(tmp_path / "trace_%r.json")

    def work(r, comm):
        grads = [np.ones(n, dtype=np.float32) for n in (300, 700, 1000)]
        specs = [(g.__array_interface__["data"][0], g.size, gradcomm.DataType.Float32) for g in grads]
        with gradcomm.Reducer(comm, specs, bucket_cap_bytes=3000, first_bucket_bytes=1200) as red:
            red.start_trace(pattern, steps=steps)
            for _ in range(steps):
                red.begin_step()
                for i in reversed(range(3)):
                    red.mark_ready(i)
                red.finalize()

    try:
        on_ranks(comms, work)
    finally:
        for c in comms:
            c.close()
    return [tmp_path / f"trace_{r}.json" for r in range(world)]


def test_trace_plot_draws_the_last_step_and_a_range(tmp_path):
    files = traced_steps(tmp_path)
    out = tmp_path / "step.png"
    r = tool("gradcomm_trace_plot.py", *files, "-o", out)
    assert r.returncode == 0, r.stderr
    assert "steps 3..3 of 2 rank(s)" in r.stdout
    assert out.read_bytes()[:8] == PNG_MAGIC
    r = tool("gradcomm_trace_plot.py", str(tmp_path / "trace_*.json"), "--steps", "1-2", "-o", tmp_path / "r.png")
    assert r.returncode == 0 and "steps 1..2" in r.stdout, r.stderr


def test_trace_plot_refuses_what_is_not_a_trace(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"results": []}')
    r = tool("gradcomm_trace_plot.py", bad, "-o", tmp_path / "x.png")
    assert r.returncode != 0 and "bad.json is not a trace" in r.stderr
    files = traced_steps(tmp_path, steps=1)
    r = tool("gradcomm_trace_plot.py", *files, "--steps", "7", "-o", tmp_path / "x.png")
    assert r.returncode != 0 and "no step in 7" in r.stderr


@pytest.mark.skipif(BIN is None, reason="GRADCOMM_BIN_DIR (set by tools/python_tests.sh) names the installed programs")
def test_perf_plot_compares_runs(tmp_path):
    runs = []
    for n in (2, 3):
        j = tmp_path / f"perf{n}.json"
        p = subprocess.run([os.path.join(BIN, "gradcomm-perf"), "--local", str(n), "-b", "8", "-e", "64K", "-f", "4",
                            "-n", "2", "-w", "1", "-J", str(j)], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
        runs.append(f"{j}:local {n} ranks")
    out = tmp_path / "busbw.png"
    r = tool("gradcomm_perf_plot.py", *runs, "-o", out)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == PNG_MAGIC
    r = tool("gradcomm_perf_plot.py", runs[0].split(":")[0], "--time", "--in-place", "-o", tmp_path / "t.png")
    assert r.returncode == 0, r.stderr
    bad = tmp_path / "empty.json"
    bad.write_text("{}")
    r = tool("gradcomm_perf_plot.py", bad, "-o", tmp_path / "x.png")
    assert r.returncode != 0 and "has no results" in r.stderr


def test_trace_plot_puts_every_rank_on_rank_0s_clock(tmp_path, monkeypatch):
    """Each trace carries its clock's offset to rank 0's (straggler attribution's
    estimate; ranks of one process share one clock, so near 0); a rank whose clock
    runs a second ahead is drawn on rank 0's."""
    import importlib.util
    import json
    monkeypatch.setenv("GRADCOMM_STRAGGLER_WINDOW", "2")  # read when the reducer is made
    files = traced_steps(tmp_path, steps=3)
    docs = [json.loads(f.read_text()) for f in files]
    assert all(abs(d["otherData"]["clock_offset_us"]) < 20000 for d in docs), [d["otherData"] for d in docs]
    skewed = docs[1]
    skewed["otherData"]["clock_offset_us"] += 1e6
    for e in skewed["traceEvents"]:
        if e.get("ph") in ("X", "i"):
            e["ts"] += 1e6
    files[1].write_text(json.dumps(skewed))
    spec = importlib.util.spec_from_file_location("trace_plot", os.path.join(SOURCE, "tools", "gradcomm_trace_plot.py"))
    plot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plot)
    ranks = plot.load([str(f) for f in files])
    first = {r: min(e["ts"] for e in evs) for r, evs in ranks.items()}
    assert abs(first[1] - first[0]) < 20000, first
