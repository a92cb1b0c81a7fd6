"""Straggler attribution from Python: three processes (shm transport) under the
DDP wrapper, one rank 60 ms late in its backward, its batch loading or its
optimizer step: every rank's report names that rank and phase (the wrapper marks
forward starts and optimizer steps), and names nobody when nobody is late; a
NaN gradient from one rank is named with its rank and parameter. The Lightning
strategies' log line comes from the same report. With ranks as threads of one
process, an optimizer's step marks only its own model's wrapper."""
import logging

import pytest

torch = pytest.importorskip("torch")
from conftest import on_ranks, run_ranks  # noqa: E402

import gradcomm  # noqa: E402
import gradcomm.torch as gct  # noqa: E402

from gradcomm._lightning_stragglers import StragglerLog  # noqa: E402


def test_three_processes_name_the_late_rank_and_its_phase(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADCOMM_STRAGGLER_WINDOW", "4")
    monkeypatch.setenv("GRADCOMM_STRAGGLER_MIN_MS", "20")
    out = run_ranks(tmp_path, 3, "--scenario", "stragglers")
    for r in out:
        assert r["transport"] == "Shm", r["transport"]
        rep = r["reports"]
        for phase, rank in (("compute", 2), ("data", 1), ("optimizer", 0)):
            got = rep[phase]
            assert got["windows"] == 2, got
            assert (got["late_rank"], got["phase"]) == (rank, phase), (phase, got)
            assert got["late_steps"] >= 3 and 40 < got["late_ms"] < 1000, got
            assert got["line"].startswith(f"gradcomm: rank {rank} was late on "), got["line"]
        assert rep["none"]["late_rank"] == -1, rep["none"]
        assert rep["none"]["line"] == "gradcomm: no rank was late on most of synced steps 6-9", rep["none"]
        assert r["nonfinite_source"] == {"rank": 1, "parameter": "fc1.weight", "steps": 4, "alone": 4,
                                         "nonfinite_steps": 4, "first_step": 6, "last_step": 9}, r


class _Report:
    def __init__(self, windows, late_rank, phase="data", late_steps=7, late_ms=201.4):
        self.windows, self.late_rank, self.phase = windows, late_rank, phase
        self.late_steps, self.late_ms = late_steps, late_ms
        self.first_step, self.last_step = 10 * windows - 9, 10 * windows


class _Wrapper:
    reducer = object()

    def __init__(self):
        self.report = _Report(0, -1)

    def straggler_report(self):
        return self.report


def test_the_lightning_line_is_written_when_the_verdict_changes_and_only_by_global_zero(caplog):
    w, log = _Wrapper(), StragglerLog()
    caplog.set_level(logging.WARNING, logger="gradcomm.lightning")
    seen = []
    for windows, late in ((0, -1), (1, 2), (1, 2), (2, 2), (3, -1), (4, 3)):
        w.report = _Report(windows, late)
        log.after_step(w, is_global_zero=True)
        log.after_step(w, is_global_zero=False)
        seen.append(len(caplog.records))
    assert seen == [0, 1, 1, 1, 2, 3], seen
    assert caplog.records[0].getMessage() == ("gradcomm: rank 2 was late on 7 of synced steps 1-10 by 201 ms "
                                              "(median), in data loading (before forward); every rank waited for it")
    assert caplog.records[1].getMessage() == "gradcomm: no rank was late on most of synced steps 21-30"


def test_an_optimizer_step_marks_only_the_wrapper_of_its_own_parameters():
    # PyTorch's post-step hook is global to the process. Marking every wrapper had
    # rank 0's thread take rank 1's reducer lock inside rank 1's step; the two ranks
    # then waited for each other until the timeout (test_fp4_wire.py, 2026-11-30).
    comms = gradcomm.init_local(2, "cpu", timeout=30)
    torch.manual_seed(0)
    nets = [torch.nn.Linear(8, 2) for _ in comms]
    wrappers = on_ranks(comms, lambda r, c: gct.DistributedDataParallel(nets[r], c))
    opts = [torch.optim.SGD(n.parameters(), lr=0.1) for n in nets]
    marks = [[], []]
    for r, w in enumerate(wrappers):
        w._note_step_mark = marks[r].append  # the instance's, in front of the method
    opts[0].step()
    assert marks == [["optimizer_done"], []]
    opts[1].step()
    assert marks == [["optimizer_done"], ["optimizer_done"]]
    on_ranks(comms, lambda r, c: wrappers[r].close())
    for c in comms:
        c.close()
