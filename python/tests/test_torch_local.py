"""gradcomm.torch with N ranks as threads of one process (the local transport):
each thread drives its own wrapper, and every rank ends with the average."""
import threading

import pytest

torch = pytest.importorskip("torch")
import gradcomm  # noqa: E402
import gradcomm.torch as gct  # noqa: E402


def test_three_local_ranks_on_the_cpu_average_like_one_process_on_the_whole_batch():
    comms = gradcomm.init_local(3, "cpu", timeout=60)
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    nets = [torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4)) for _ in comms]
    for n in nets:
        n.load_state_dict(ref.state_dict())
    xs = [torch.randn(5, 16, generator=torch.Generator().manual_seed(r)) for r in range(3)]
    grads, errors = [None] * 3, []

    def rank(r):
        try:
            model = gct.DistributedDataParallel(nets[r], comms[r])
            model(xs[r]).square().mean().backward()
            grads[r] = [p.grad.clone() for p in nets[r].parameters()]
            model.close()
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    # The mean of the three per-rank means = one process on the whole batch.
    ref(torch.cat(xs)).square().mean().backward()
    for r in range(3):
        for g, p in zip(grads[r], ref.parameters()):
            assert torch.allclose(g, p.grad, rtol=1e-5, atol=1e-7)
        assert all(torch.equal(a, b) for a, b in zip(grads[r], grads[0]))
    for c in comms:
        c.close()


def _on_threads(n, fn):
    out, errors = [None] * n, []

    def run(r):
        try:
            out[r] = fn(r)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=run, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return out


def test_compression_by_name_and_its_checkpoint_across_wrappers():
    """compression= takes a name or a dict; comm_state_dict carries the compression's
    state, which a wrapper with the same compression (in either spelling) loads and a
    wrapper without it refuses."""
    comms = gradcomm.init_local(3, "cpu", timeout=60)
    torch.manual_seed(0)
    nets = [torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Tanh(), torch.nn.Linear(256, 8)) for _ in comms]
    for n in nets[1:]:
        n.load_state_dict(nets[0].state_dict())
    xs = [torch.randn(4, 64, generator=torch.Generator().manual_seed(r)) for r in range(3)]

    def rank(r):
        model = gct.DistributedDataParallel(nets[r], comms[r], compression={"kind": "int8", "block_size": 128})
        for _ in range(3):
            nets[r].zero_grad()
            model(xs[r]).square().mean().backward()
        stats = model.reducer.compression_stats()
        state = model.comm_state_dict()
        grads = [p.grad.clone() for p in nets[r].parameters()]
        model.close()
        again = gct.DistributedDataParallel(nets[r], comms[r], quantize=dict(block_size=128))  # the older spelling
        again.load_comm_state_dict(state)
        reloaded = again.comm_state_dict()
        again.close()
        plain = gct.DistributedDataParallel(nets[r], comms[r])
        with pytest.raises(gradcomm.InvalidArgumentError, match="saved with compression int8, this model uses none"):
            plain.load_comm_state_dict(state)
        plain.close()
        return stats, state, reloaded, grads

    out = _on_threads(3, rank)
    for stats, state, reloaded, grads in out:
        assert stats["compressed_steps"] == 3 and stats["bytes_last_step"] < 0.3 * stats["f32_allreduce_bytes"]
        assert state["compression"]["kind"] == "int8" and reloaded == state
        assert all(torch.equal(a, b) for a, b in zip(grads, out[0][3]))  # every rank holds the same result
    for c in comms:
        c.close()


def test_the_divergence_check_names_a_rank_whose_parameters_drifted():
    """divergence_check_every=2: the second training forward checks the parameters;
    a weight changed on one rank (a flipped bit's worth) raises DivergenceError on
    every rank, naming that rank and parameter. Buffers are checked on request."""
    comms = gradcomm.init_local(3, "cpu", timeout=60)
    torch.manual_seed(0)
    nets = [torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 2))
            for _ in comms]

    def rank(r):
        model = gct.DistributedDataParallel(nets[r], comms[r], divergence_check_every=2, broadcast_buffers=False)
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(r))
        model(x).sum().backward()  # forward 1: not checked
        agreed = model.check_divergence()  # the parameters: rank 0's after wrapping, then the same average
        buffers = model.check_divergence(buffers=True)  # each rank's BatchNorm statistics, of its own batch
        if r == 2:
            with torch.no_grad():
                nets[r][2].weight[1, 3] += 1e-6
        try:
            model(x)
            raised = None
        except gradcomm.DivergenceError as e:
            raised = e
        model.close()
        return agreed, buffers, raised

    out = _on_threads(3, rank)
    for agreed, buffers, raised in out:
        assert agreed.agreed, str(agreed)
        assert not buffers.agreed and set(buffers.ranks.values()) <= {"1.running_mean", "1.running_var"}
        assert raised is not None and raised.report.ranks == {2: "2.weight"}, raised
        assert "rank 2 (first at '2.weight')" in str(raised)
    with pytest.raises(gradcomm.InvalidArgumentError, match="divergence_check_every"):
        gct.DistributedDataParallel(torch.nn.Linear(2, 2), comms[0], divergence_check_every=-1)
    for c in comms:
        c.close()
