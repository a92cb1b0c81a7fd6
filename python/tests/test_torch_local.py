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
