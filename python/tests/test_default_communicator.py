"""The process's default communicator (init_from_env) under misuse: used from
several threads at once, asked for again after the launcher's environment
changed, asked for with a transport that does not exist (issue 44, items 8, 11
and 12)."""
import pytest

torch = pytest.importorskip("torch")

import gradcomm  # noqa: E402
from gradcomm import comm as _comm  # noqa: E402
from conftest import free_port, run_ranks  # noqa: E402

def test_a_changed_launcher_environment_is_refused_while_the_default_is_open(launcher_env):
    # Before: init_from_env silently returned the old world's communicator.
    first = gradcomm.init_from_env(timeout=30)
    launcher_env["WORLD_SIZE"] = "2"
    launcher_env["MASTER_PORT"] = str(free_port())
    with pytest.raises(gradcomm.InvalidStateError, match=r"WORLD_SIZE.*'1' -> '2'.*MASTER_PORT"):
        gradcomm.init_from_env()
    launcher_env["WORLD_SIZE"] = "1"  # as it was (the port still differs)
    with pytest.raises(gradcomm.InvalidStateError, match="MASTER_PORT"):
        gradcomm.init_from_env()
    first.close()
    assert not _comm._defaults
    again = gradcomm.init_from_env(timeout=30)  # a new one, for the environment as it is now
    assert again.world_size == 1
    again.close()


def test_the_same_environment_still_shares_the_default(launcher_env):
    a = gradcomm.init_from_env(timeout=30)
    b = gradcomm.init_from_env()
    assert a.handle == b.handle
    a.close()
    b.close()


def test_unknown_transport_names_are_refused_listing_the_known_ones():
    # Before: AttributeError: CarrierPigeon.
    with pytest.raises(gradcomm.InvalidArgumentError, match="'carrier-pigeon' is not one of") as refused:
        gradcomm.init(0, 1, transport="carrier-pigeon")
    for name in ("auto", "nccl", "socket", "shm", "mpi", "cuda-ipc"):
        assert name in str(refused.value)


def test_threads_sharing_the_default_communicator_never_get_a_wrong_sum(tmp_path):
    # Before: some calls returned success with mixed sums (half 10, half 110).
    out = run_ranks(tmp_path, 2, "--scenario", "threads_share_default")
    for r in range(2):
        calls = out[r]["calls"]
        assert len(calls) == 4
        for c in calls:
            assert c["ok"] is False, f"rank {r}: a call from a thread racing others returned {c}"
            assert c["error"], c
        assert any("another thread" in c["error"] for c in calls) or r == 1, calls
