"""gradcomm.torch.OuterSync (DiLoCo) on three CPU ranks: rank 0's parameters
everywhere at creation, every rank identical after each sync and apart between
them, a regression to a teacher (each rank its own fresh samples) that learns
through syncs every 8 steps with the f32 and the fp4 wire, a sync overlapping the
next two steps (streaming DiLoCo), the state's round trip, and the refusals."""
import pytest

torch = pytest.importorskip("torch")
import gradcomm  # noqa: E402
import gradcomm.torch as gct  # noqa: E402
from conftest import on_ranks  # noqa: E402


def models(n):
    torch.manual_seed(0)
    return [torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 4))
            for _ in range(n)]


def train(compression, steps=64, sync_every=8, fragments=1, device="cpu", round_trip=False, **options):
    """Three local ranks of `device` fit a teacher, each on its own samples; OuterSync's
    state goes out and back in at the end with round_trip (test_torch_cuda.py: on a GPU)."""
    comms = gradcomm.init_local(3, device, timeout=60)
    nets = [m.to(device) for m in models(3)]  # different weights on every rank: OuterSync starts them from rank 0's
    torch.manual_seed(1)
    teacher = torch.nn.Linear(32, 4).to(device)

    def rank(r, c):
        outer = gct.OuterSync(nets[r], c, sync_every=sync_every, fragments=fragments, compression=compression,
                              **options)
        start = [p.detach().clone() for p in nets[r].parameters()]
        opt = torch.optim.SGD(nets[r].parameters(), lr=0.05)
        gen = torch.Generator(device=device).manual_seed(100 + r)
        losses, synced = [], []
        for _ in range(steps):
            x = torch.randn(16, 32, generator=gen, device=device)
            with torch.no_grad():
                y = teacher(x)
            opt.zero_grad()
            loss = (nets[r](x) - y).square().mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            synced.append(outer.step())
        if round_trip:
            outer.load_state_dict(outer.state_dict())
        params = [p.detach().clone() for p in nets[r].parameters()]
        stats = outer.stats()
        outer.close()
        return start, losses, synced, params, stats

    out = on_ranks(comms, rank)
    for c in comms:
        c.close()
    return out


def test_every_rank_starts_from_rank_0_and_is_identical_after_each_sync():
    out = train(None)
    for start, _, synced, params, stats in out:
        assert all(torch.equal(a, b) for a, b in zip(start, out[0][0])), "rank 0's parameters at creation"
        assert [i + 1 for i, s in enumerate(synced) if s] == list(range(8, 65, 8))
        assert all(torch.equal(a, b) for a, b in zip(params, out[0][3])), "identical after the last sync"
        assert stats["inner_steps"] == 64 and stats["syncs"] == 8 and stats["skipped_syncs"] == 0
        assert stats["bytes_sent"] == 0  # the local transport counts no bytes (socket and shm do)


@pytest.mark.parametrize("compression", [None, "fp4"])
def test_a_regression_learns_through_rare_syncs(compression):
    out = train(compression, steps=96)
    first = sum(sum(o[1][:8]) for o in out) / 24
    last = sum(sum(o[1][-8:]) for o in out) / 24
    assert last < 0.5 * first, f"{compression}: from {first} to {last}"


def test_fragments_sync_in_turn():
    out = train(None, steps=8, sync_every=8, fragments=2)  # phases 4 and 8
    assert [i + 1 for i, s in enumerate(out[0][2]) if s] == [4, 8]
    # Fragment 0 is the first weight (2048 of 2372 values), fragment 1 the rest: synced
    # at step 8, equal on every rank; fragment 0 synced at step 4 and moved apart since.
    first, rest = [p[0] for p in (out[0][3], out[1][3])], [p[1:] for p in (out[0][3], out[1][3])]
    assert all(torch.equal(a, b) for a, b in zip(*rest))
    assert not torch.equal(*first)


@pytest.mark.parametrize("compression", [None, "int8"])
def test_an_overlapped_sync_lands_tau_steps_later_and_still_learns(compression):
    # Streaming DiLoCo: started after steps 8, 16, ..., applied after 10, 18, ...; the
    # ranks keep half of the two steps' progress, so they differ after a landing.
    out = train(compression, steps=96, overlap_steps=2)
    for _, _, synced, _, stats in out:
        assert [i + 1 for i, s in enumerate(synced) if s] == list(range(10, 97, 8))
        assert stats["syncs"] == 11 and stats["skipped_syncs"] == 0  # the sync of step 96 is in flight
    assert not all(torch.equal(a, b) for a, b in zip(out[0][3], out[1][3])), "mixed with each rank's own steps"
    first = sum(sum(o[1][:8]) for o in out) / 24
    last = sum(sum(o[1][-8:]) for o in out) / 24
    assert last < 0.5 * first, f"{compression}: from {first} to {last}"


def test_the_state_round_trips_and_bad_input_is_refused():
    comm = gradcomm.init_local(1, "cpu", timeout=30)[0]
    net = models(1)[0]
    outer = gct.OuterSync(net, comm, sync_every=2, compression={"kind": "int8", "block_size": 32})
    for _ in range(3):
        outer.step()
    state = outer.state_dict()
    again = gct.OuterSync(net, comm, sync_every=2, compression={"kind": "int8", "block_size": 32})
    again.load_state_dict(state)
    assert again.stats()["inner_steps"] == 3 and again.state_dict() == state
    other = gct.OuterSync(net, comm, sync_every=2)
    with pytest.raises(gradcomm.InvalidArgumentError, match="wire .int8:block_size=32."):
        other.load_state_dict(state)
    with pytest.raises(gradcomm.InvalidArgumentError, match="rows"):
        gct.OuterSync(net, comm, compression="powersgd")
    with pytest.raises(gradcomm.InvalidArgumentError,
                       match=r"overlap_steps=5: expected an integer in 0..sync_every // fragments \(4\)"):
        gct.OuterSync(net, comm, sync_every=8, fragments=2, overlap_steps=5)
    with pytest.raises(gradcomm.InvalidArgumentError, match="mix=1.0"):
        gct.OuterSync(net, comm, sync_every=8, overlap_steps=1, mix=1.0)
    with pytest.raises(gradcomm.InvalidArgumentError, match="float32"):
        gct.OuterSync([torch.zeros(4, dtype=torch.float16)], comm)
    with pytest.raises(gradcomm.InvalidArgumentError, match="fragments"):
        gct.OuterSync(net, comm, sync_every=2, fragments=3)
    for o in (outer, again, other):
        o.close()
    comm.close()
