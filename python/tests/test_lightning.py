"""gradcomm.lightning.GradcommStrategy in a real Lightning Trainer (accelerator="cpu",
devices=2: Lightning's own launcher starts the second process), against
strategy="ddp" on the same module, data and seeds (lightning_worker.py)."""
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("lightning")

from conftest import free_port_pair  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
POWERSGD = 'compression={"kind": "powersgd", "rank": 2, "start_iter": 3, "min_compression_rate": 0.5}'


def run(tmp_path, name, strategy, *args, torchrun=False):
    """One Trainer run (two processes: Lightning's launcher starts the second, or
    torchrun both); rank 0's result."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT", "GRADCOMM_MASTER_PORT",
                "TORCHELASTIC_RUN_ID"):
        env.pop(var, None)
    port = free_port_pair()  # gradcomm's store takes the port after Lightning's (or torchrun's agent's)
    launcher = [sys.executable]
    if torchrun:
        launcher += ["-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(port)]
    else:
        env["MASTER_PORT"] = str(port)
    cmd = [*launcher, os.path.join(HERE, "lightning_worker.py"), "--strategy", strategy, "--outdir",
           str(tmp_path), "--name", name, *args]
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-6000:]
    with open(tmp_path / f"{name}.json") as f:
        return json.load(f)


def subprocess_run_fails(tmp_path, name, strategy, *args):
    """A Trainer run that must fail; its output."""
    with pytest.raises(AssertionError) as failed:
        run(tmp_path, name, strategy, *args)
    return str(failed.value)


def worst(a, b):
    return max(abs(x - y) for ta, tb in zip(a, b) for x, y in zip(ta, tb))


def test_strategy_gradcomm_trains_validates_and_tests_as_ddp_does(tmp_path):
    gc = run(tmp_path, "gc", "gradcomm")
    ddp = run(tmp_path, "ddp", "ddp")
    assert gc["strategy"] == "GradcommStrategy" and ddp["strategy"] == "DDPStrategy"
    assert gc["steps"] == ddp["steps"] == 20
    assert worst(gc["params"], ddp["params"]) <= 1e-6
    assert gc["val"] == ddp["val"] and gc["test"] == ddp["test"]


def test_checkpoints_resume_as_ddp_and_carry_powersgd_state(tmp_path):
    # Lightning's resume itself is not bit-exact against an uninterrupted run here
    # (DDP's neither): gradcomm's resumed run must equal DDP's resumed run.
    for s in ("gradcomm", "ddp"):
        run(tmp_path, f"{s}_half", s, "--steps", "10", "--save", str(tmp_path / f"{s}.ckpt"))
    gc = run(tmp_path, "gc_resumed", "gradcomm", "--resume", str(tmp_path / "gradcomm.ckpt"))
    ddp = run(tmp_path, "ddp_resumed", "ddp", "--resume", str(tmp_path / "ddp.ckpt"))
    assert worst(gc["params"], ddp["params"]) <= 1e-6
    # PowerSGD: both ranks' state (Q and error feedback) is in the checkpoint, and
    # resuming with it differs from resuming without it.
    run(tmp_path, "ps_half", "gradcomm", "--option", POWERSGD, "--steps", "10", "--save", str(tmp_path / "ps.ckpt"))
    ck = torch.load(tmp_path / "ps.ckpt", weights_only=False)
    assert ck["gradcomm"]["world_size"] == 2
    assert [s["compression"]["kind"] for s in ck["gradcomm"]["ranks"]] == ["powersgd", "powersgd"]
    del ck["gradcomm"]
    torch.save(ck, tmp_path / "ps_stateless.ckpt")
    with_state = run(tmp_path, "ps_resumed", "gradcomm", "--option", POWERSGD, "--resume", str(tmp_path / "ps.ckpt"))
    without = run(tmp_path, "ps_stateless", "gradcomm", "--option", POWERSGD, "--resume",
                  str(tmp_path / "ps_stateless.ckpt"))
    assert worst(with_state["params"], without["params"]) > 1e-6


def test_int8_wire_through_the_strategy(tmp_path):
    gc = run(tmp_path, "int8", "gradcomm", "--option", 'compression="int8"')
    ddp = run(tmp_path, "ddp", "ddp")
    assert gc["steps"] == 20
    # int8 rounds every gradient: close to DDP's, not equal.
    assert 0 < worst(gc["params"], ddp["params"]) < 0.05


def test_outer_synchronization_through_the_strategy(tmp_path):
    """outer_sync= trains without per-step reduction (the ranks' parameters apart
    between syncs) and syncs every 4 steps (equal on both ranks after step 20); its
    state is in the checkpoint; wrapper options are refused beside it."""
    import gradcomm
    from gradcomm.lightning import GradcommStrategy
    out = run(tmp_path, "outer", "gradcomm", "--option", 'outer_sync={"sync_every": 4, "compression": "int8"}',
              "--save", str(tmp_path / "outer.ckpt"))
    ddp = run(tmp_path, "ddp", "ddp")
    assert out["steps"] == 20 and worst(out["params"], ddp["params"]) > 1e-6
    ranks = [json.load(open(tmp_path / f"outer.rank{r}.params.json")) for r in range(2)]
    assert ranks[0] == ranks[1], "both ranks hold the outer parameters after the sync at step 20"
    odd = run(tmp_path, "outer_odd", "gradcomm", "--option", 'outer_sync={"sync_every": 6}')
    ranks = [json.load(open(tmp_path / f"outer_odd.rank{r}.params.json")) for r in range(2)]
    assert ranks[0] != ranks[1], "two steps after the sync at step 18 the ranks are apart"
    ck = torch.load(tmp_path / "outer.ckpt", weights_only=False)
    assert [sorted(s) for s in ck["gradcomm"]["ranks"]] == [["outer_sync"], ["outer_sync"]]
    with pytest.raises(gradcomm.InvalidArgumentError, match="do not apply"):
        GradcommStrategy(outer_sync=dict(sync_every=4), compression="int8")
    with pytest.raises(gradcomm.InvalidArgumentError, match="its keys are"):
        GradcommStrategy(outer_sync=dict(every=4))
    for bad, named in ((dict(sync_every=4, compression="powersgd"), "rows"), (dict(fragments=0), "fragments"),
                       (dict(outer_lr=0), "outer_lr"), (dict(wire_dtype="float64"), "wire_dtype")):
        with pytest.raises(gradcomm.InvalidArgumentError, match=named):
            GradcommStrategy(outer_sync=bad)
    # A checkpoint of one kind refused by the other, with the reason.
    failed = subprocess_run_fails(tmp_path, "mixed", "gradcomm", "--resume", str(tmp_path / "outer.ckpt"))
    assert "saved with outer_sync" in failed


def test_the_strategy_logs_the_late_rank(tmp_path, monkeypatch):
    """Rank 1's training steps take 60 ms longer: the global zero's log names it, once."""
    monkeypatch.setenv("GRADCOMM_STRAGGLER_WINDOW", "4")
    out = run(tmp_path, "late", "gradcomm", "--late-rank", "1", "--steps", "12")
    lines = out["straggler_lines"]
    assert len(lines) == 1, lines
    assert lines[0].startswith("gradcomm: rank 1 was late on ") and "in forward and backward" in lines[0], lines


def test_unknown_options_are_refused_when_the_trainer_is_built():
    import gradcomm
    from gradcomm.lightning import GradcommStrategy
    with pytest.raises(gradcomm.InvalidArgumentError, match="bucket_size.*its options are.*bucket_cap_mb"):
        GradcommStrategy(bucket_size=25)
    with pytest.raises(gradcomm.InvalidArgumentError, match="ranks_per_device is not available yet"):
        GradcommStrategy(ranks_per_device=2)


@pytest.mark.parametrize("options,named", [
    (dict(compression="bogus"), "bogus"),
    (dict(compression=dict(kind="powersgd", rank=0)), "rank"),
    (dict(compression=dict(kind="int8", block_size=0)), "block_size"),
    (dict(bucket_cap_mb=-1), "bucket_cap_mb"),
    (dict(bucket_cap_mb=float("nan")), "bucket_cap_mb"),
    (dict(timeout=0), "timeout"),
    (dict(timeout=-5), "timeout"),
    (dict(wire_dtype="float64"), "wire_dtype"),
])
def test_bad_option_values_are_refused_when_the_trainer_is_built(options, named):
    # Issue 44 #9: before, these surfaced in fit as "InvalidStateError: gcommCommDestroy:
    # the communicator is used by 1 reducer(s)", a TypeError, or not at all.
    import gradcomm
    from gradcomm.lightning import GradcommStrategy
    with pytest.raises(gradcomm.InvalidArgumentError, match=named):
        GradcommStrategy(**options)


def test_16_mixed_runs_on_gradcomms_fused_grad_scaler(tmp_path):
    # Lightning's GradScaler is replaced by gradcomm's (unscale and the Inf/NaN check
    # inside the reduction): same scale trajectory and parameters as DDP's.
    gc = run(tmp_path, "gc16", "gradcomm", "--fp16")
    ddp = run(tmp_path, "ddp16", "ddp", "--fp16")
    assert gc["scaler"] == "gradcomm.torch._amp" and ddp["scaler"] == "torch.amp.grad_scaler"
    assert gc["scale"] == ddp["scale"] == 2.0 ** 12 * 2 ** 6  # grown every 3 steps
    assert worst(gc["params"], ddp["params"]) <= 1e-6


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU: tools/gpu_check.sh's python stage runs it")
def test_one_gpu_with_16_mixed_trains_as_ddp_does(tmp_path):
    gc = run(tmp_path, "gpu_gc", "gradcomm", "--gpu", "--fp16")
    ddp = run(tmp_path, "gpu_ddp", "ddp", "--gpu", "--fp16")
    assert gc["scaler"] == "gradcomm.torch._amp"
    assert gc["scale"] == ddp["scale"]
    assert worst(gc["params"], ddp["params"]) <= 1e-5


def test_under_torchrun_as_ddp_does(tmp_path):
    # torchrun starts both processes (Lightning's TorchElasticEnvironment); its agent
    # holds MASTER_PORT, gradcomm's store the next port.
    gc = run(tmp_path, "tr_gc", "gradcomm", "--exit-probe", str(tmp_path / "open_at_exit"), torchrun=True)
    ddp = run(tmp_path, "tr_ddp", "ddp", torchrun=True)
    assert gc["strategy"] == "GradcommStrategy" and gc["steps"] == 20
    # The strategy closed torch.distributed's group before Python finalized (left open,
    # gloo's threads aborted 3 exits in 20 under torchrun).
    probes = sorted(tmp_path.glob("open_at_exit.*"))
    assert len(probes) == 2 and all(p.read_text() == "False" for p in probes), [p.read_text() for p in probes]
    assert worst(gc["params"], ddp["params"]) <= 1e-6


# ---- training through failures: FaultTolerantStrategy, a Trainer per member ----

@pytest.mark.parametrize("fp16", [False, True], ids=["32", "16-mixed"])
def test_fault_tolerant_members_survive_a_kill_and_take_a_restarted_member_back(fp16):
    """Three members (lightning_ft_worker.py, each from its own seed); the one that
    is rank 1 is killed in its training step 10 and a fourth process joins later:
    the job goes on, the newcomer receives the model, SGD's momentum, the LR schedule
    (and with 16-mixed, gradcomm's fused GradScaler's state), and every member ends
    with one state at the same global_step."""
    import gradcomm
    from test_membership import members
    with gradcomm.StoreServer(host="127.0.0.1") as server:
        out = members(server, 3, "--steps", "60", "--final-world", "3", "--die", "10:1", *(["--fp16"] if fp16 else []),
                      late=1, late_after=1.0, timeout=300, worker="lightning_ft_worker.py",
                      own=lambda i: ["--seed", str(i)])
    log = "\n".join(text[-3000:] for _, text, _ in out)
    assert [o[0] for o in out].count(-9) == 1, log
    done = [o[2] for o in out if o[0] == 0]
    assert len(done) == 3, log
    for key in ("state", "lr", "global_step", "committed", "scale"):
        assert len({d[key] for d in done}) == 1, f"{key} differs\n{log}"
    if fp16:
        assert done[0]["scaler"] == "gradcomm.torch._amp" and done[0]["scale"] > 2.0 ** 12, log
    assert done[0]["global_step"] == done[0]["committed"] >= 60, log
    newcomer = out[3][2]
    assert newcomer["stats"]["state_bytes_received"] > 0 and newcomer["world"] == 3, out[3][1]
    # The two original survivors (and the newcomer too, had it joined before the kill).
    survivors = [d for d in done if d["stats"]["failures_survived"] == 1]
    assert len(survivors) >= 2 and all(d["stats"]["steps_discarded"] == 1 for d in survivors), log


def test_fault_tolerant_options_are_checked_when_the_trainer_is_built():
    import gradcomm
    from gradcomm.lightning import FaultTolerantStrategy, GradcommStrategy
    with pytest.raises(gradcomm.InvalidArgumentError, match="GradcommStrategy runs on torch.distributed's fixed"):
        GradcommStrategy(membership=object())
    with pytest.raises(gradcomm.InvalidArgumentError, match="bucket_size.*its options are"):
        FaultTolerantStrategy(bucket_size=25)
    with pytest.raises(gradcomm.InvalidArgumentError, match="gradient_as_bucket_view cannot be used"):
        FaultTolerantStrategy(gradient_as_bucket_view=True)
    with pytest.raises(gradcomm.InvalidArgumentError, match="bogus"):
        FaultTolerantStrategy(compression="bogus")
    with pytest.raises(gradcomm.InvalidArgumentError, match="min_ranks"):
        FaultTolerantStrategy(min_ranks=0)
    import lightning.pytorch as pl
    assert "gradcomm_fault_tolerant" in pl.strategies.StrategyRegistry
