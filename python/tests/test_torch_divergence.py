"""The divergence check across real processes (3 ranks over the shm transport, each
its own Python process): a rank whose model came from another seed, a synced job
after training, and one flipped bit are each reported alike on every rank."""
import pytest

torch = pytest.importorskip("torch")
from conftest import run_ranks  # noqa: E402


def test_three_processes_name_the_unsynced_rank_and_the_flipped_bit(tmp_path):
    out = run_ranks(tmp_path, 3, "--scenario", "divergence")
    for r in out:
        assert r["transport"] == "Shm", r["transport"]
        reports = r["reports"]
        assert reports["unsynced"]["ranks"] == {"2": "conv.weight"}, reports  # another seed: its first tensor
        # Every tensor the seed draws differs; LayerNorm's ones and zeros do not.
        assert reports["unsynced"]["mismatched"] == 6, reports
        assert reports["trained"] == {"ranks": {}, "mismatched": 0}, reports
        assert reports["flipped"] == {"ranks": {"1": "fc1.weight"}, "mismatched": 1}, reports
