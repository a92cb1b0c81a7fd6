"""gradcomm.torch.DistributedDataParallel against torch's DDP (gloo) on the same
model, data and seeds, 2 and 3 processes (gradcomm over its socket transport):
parameters after the steps agree to 1e-6 (per tensor, relative to its largest
element), every rank ends with the same parameters, and gradients cleared or
replaced in every way PyTorch code does it change nothing."""
import pytest

from conftest import max_rel_diff, run_ranks

pytest.importorskip("torch")

PARITY = [
    pytest.param(2, ["--opt", "sgd", "--zero-grad", "none"], id="2p-sgd-zero_grad-set_to_none"),
    pytest.param(2, ["--opt", "adam", "--zero-grad", "zero"], id="2p-adam-zero_grad-set_to_none_false"),
    pytest.param(3, ["--opt", "adam", "--zero-grad", "assign"], id="3p-adam-grads-assigned-noncontiguous"),
    pytest.param(2, ["--opt", "adam", "--zero-grad", "mixed", "--bucket-view"], id="2p-adam-mixed-bucket-view"),
    pytest.param(3, ["--opt", "sgd_momentum", "--zero-grad", "mixed", "--steps", "40"], id="3p-momentum-mixed-40"),
    pytest.param(3, ["--opt", "sgd_momentum", "--accumulate", "3", "--steps", "10"], id="3p-no_sync-accumulate-3"),
    pytest.param(2, ["--opt", "adam", "--accumulate", "2", "--zero-grad", "none", "--bucket-view", "--steps", "12"],
                 id="2p-no_sync-bucket-view"),
    pytest.param(2, ["--branch", "--opt", "sgd"], id="2p-unused-parameters-zero"),
    pytest.param(3, ["--branch", "--opt", "sgd", "--zero-grad", "zero"], id="3p-unused-parameters-zero"),
]


@pytest.mark.parametrize("world,args", PARITY)
def test_parameters_equal_ddp(tmp_path, world, args):
    results = run_ranks(tmp_path, world, *args)
    ddp = results[0]["ddp"]
    for r in results:
        assert r["ddp"] == ddp, "torch's DDP itself left the ranks different"
        assert r["gradcomm"] == results[0]["gradcomm"], f"rank {r['rank']} differs from rank 0"
    assert max_rel_diff(results[0]["gradcomm"], ddp) <= 1e-6


def test_f16_wire_matches_fp16_compress_hook_within_rounding(tmp_path):
    results = run_ranks(tmp_path, 2, "--wire", "f16", "--record-grads", "--steps", "10")
    gc, ddp = results[0]["gradcomm_record"]["grads"], results[0]["ddp_record"]["grads"]
    # Both round every gradient to f16 once before the sum: one f16 rounding
    # (2^-11 relative) of the largest element, plus the f16 sum's.
    assert max_rel_diff(gc, ddp) <= 2e-3
    assert max_rel_diff(results[0]["gradcomm"], results[0]["ddp"]) <= 1e-3
    assert results[1]["gradcomm"] == results[0]["gradcomm"]


@pytest.mark.parametrize("world", [2, 3])
def test_amp_scale_trajectory_and_skipped_steps_equal_torch_gradscaler(tmp_path, world):
    # Inf on one rank at steps 4, 5 and 9: every rank skips them, the scale backs
    # off, and grows again after 3 clean steps (growth_interval 3).
    results = run_ranks(tmp_path, world, "--amp", "--inject", "4", "5", "9", "--steps", "14", "--opt", "adam")
    gc, ddp = results[0]["gradcomm_record"]["scale"], results[0]["ddp_record"]["scale"]
    assert gc == ddp
    assert len(set(gc)) > 2, f"the trajectory should grow and back off: {gc}"
    assert max_rel_diff(results[0]["gradcomm"], results[0]["ddp"]) <= 1e-6
    for r in results:
        assert r["gradcomm"] == results[0]["gradcomm"]


def test_unused_parameters_error_names_them_and_the_model_stays_usable(tmp_path):
    results = run_ranks(tmp_path, 2, "--scenario", "unused_error")
    assert results[0]["raised"] is None, "rank 0 used every parameter"
    assert results[1]["raised"] == ["branch.bias", "branch.weight"]
    assert "branch.weight" in results[1]["message"] and "unused_parameters='zero'" in results[1]["message"]
    assert [r["after"] for r in results] == [2, 2], "the failed step and the next one both completed"


def test_checkpoint_restored_in_fresh_processes_continues_exactly(tmp_path):
    common = ["--opt", "adam", "--amp", "--inject", "12", "--powersgd", "--bucket-mb", "25", "--steps", "20",
              "--zero-grad", "mixed", "--skip-ddp"]
    whole = run_ranks(tmp_path / "whole", 2, *common) if (tmp_path / "whole").mkdir() is None else None
    (tmp_path / "split").mkdir()
    run_ranks(tmp_path / "split", 2, *common, "--checkpoint-at", "10")
    resumed = run_ranks(tmp_path / "split", 2, *common, "--checkpoint-at", "10", "--resume")
    for r in range(2):
        assert resumed[r]["gradcomm"] == whole[r]["gradcomm"], f"rank {r}: steps 11-20 after a restore differ"
    assert whole[0]["gradcomm_record"]["powersgd_compressed_steps"] > 0


@pytest.mark.parametrize("world,rank", [(2, 2), (3, 4)])
def test_powersgd_equals_powersgd_hook_fed_the_same_q(tmp_path, world, rank):
    # Matrices only, so the hook's error feedback (over the whole bucket) and
    # gradcomm's (over the matrices) coincide; gradcomm's Q is orthogonalized before
    # each compressed step as the hook does with warm start (docs/pytorch.md).
    results = run_ranks(tmp_path, world, "--scenario", "powersgd_parity", "--steps", "12", "--powersgd-start", "3",
                        "--powersgd-rank", rank)
    r0 = results[0]
    assert r0["compressed_steps"] == 9
    per_step = [max_rel_diff(a, b) for a, b in zip(r0["gradcomm_grads"], r0["ddp_grads"])]
    assert max(per_step[:3]) <= 1e-6, "before start_iter both all-reduce whole gradients"
    assert per_step[3] <= 1e-5, per_step
    assert max(per_step) <= 1e-4, per_step
    for r in results[1:]:
        assert r["gradcomm_grads"] == r0["gradcomm_grads"]


def test_default_communicator_is_shared_and_made_again_after_its_last_user(tmp_path):
    # init_from_env twice and two wrapped models with comm=None in one process (a GAN,
    # teacher and student, an EMA copy): before, the second failed on rank 0 with
    # "Address already in use" and on rank 1 with "... already holds".
    results = run_ranks(tmp_path, 2, "--scenario", "shared_default")
    for r in results:
        assert r["one_native_comm"] and r["wrappers_share_it"]
        assert r["after_first_closed"] == [3.0] * 4  # 1 + 2: still usable once one user closed
        assert r["gen"] == results[0]["gen"] and r["disc"] == results[0]["disc"]
        # 20 cycles of close and make again, ranks out of step: each met its own cycle's peer.
        assert r["cycles"] == [float(2 * cycle * 10 + 1) for cycle in range(20)]


def test_torch_compile_matches_eager(tmp_path):
    # Before, compiling the wrapper failed inside dynamo ("Guard failed on the same
    # frame it was created ... _finalizer ... _registry"): the buffers' broadcast in
    # forward touched gradcomm's handles; it now runs outside the graph.
    results = run_ranks(tmp_path, 2, "--scenario", "compile")
    for r in results:
        for mode in ("compile_wrapper", "wrap_compiled", "compile_loss", "compiled_autograd"):
            # Absolute: the bias before the BatchNorm gets no gradient and stays at
            # rounding noise (1e-9), where a relative difference means nothing.
            worst = max(abs(a - b) for ta, tb in zip(r[mode], r["eager"]) for a, b in zip(ta, tb))
            assert worst <= 1e-5, (mode, worst)
        assert r["compile_wrapper"] == results[0]["compile_wrapper"]
        assert r["compiled_autograd"] == results[0]["compiled_autograd"]


@pytest.mark.parametrize("effective", [False, True], ids=["divide-by-world", "divide-by-ranks-with-inputs"])
def test_join_with_uneven_inputs_equals_ddp_join(tmp_path, effective):
    # Ranks with 3, 4 and 7 batches. Before join() existed, the rank with more
    # batches waited for the others' gradients until the timeout.
    args = ["--scenario", "join", "--batches", "3", "4", "7"] + (["--join-effective"] if effective else [])
    results = run_ranks(tmp_path, 3, *args)
    for r in results:
        assert r["gradcomm"] == results[0]["gradcomm"], "every rank ends with the last joiner's parameters"
        # Absolute: the bias before the BatchNorm stays at rounding noise (1e-9).
        worst = max(abs(a - b) for ta, tb in zip(r["gradcomm"], r["ddp"]) for a, b in zip(ta, tb))
        assert worst <= 1e-6
        assert "ran out of inputs" in r["raised"]


def test_join_with_gradient_accumulation_completes(tmp_path):
    # no_sync steps inside join(): the ranks that ran out shadow each forward's buffer
    # broadcast but only the synced backward passes (torch's DDP has no reference here).
    results = run_ranks(tmp_path, 3, "--scenario", "join", "--batches", "4", "6", "9", "--accumulate", "2")
    for r in results:
        assert r["gradcomm"] == results[0]["gradcomm"]
        assert "ran out of inputs" in r["raised"]
