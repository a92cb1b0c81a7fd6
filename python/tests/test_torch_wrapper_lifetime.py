"""The DDP wrapper's lifetime, as a migrating DDP user treats it: wrapped again
without close(), dropped without close(). torch's DDP has no close(); neither may
need one (issue 44, items 1 and 2)."""
import gc
import weakref

import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402

import gradcomm  # noqa: E402
import gradcomm.torch as gct  # noqa: E402
from gradcomm import comm as _comm  # noqa: E402
from conftest import on_ranks  # noqa: E402


def post_accumulate_hooks(p):
    return len(getattr(p, "_post_accumulate_grad_hooks", None) or {})


def test_a_module_wrapped_again_without_close_is_reduced_once_by_the_new_wrapper():
    # Before: both wrappers' hooks fired; every rank agreed on gradients that were
    # not the average (max difference 6.05), and the bytes per step doubled.
    comms = gradcomm.init_local(2, "cpu", timeout=60)

    def rank(r, comm):
        torch.manual_seed(0)
        net = nn.Linear(64, 64)
        first = gct.DistributedDataParallel(net, comm)
        net.extra = nn.Parameter(torch.ones(64))  # a parameter added after wrapping
        x = torch.randn(8, 64, generator=torch.Generator().manual_seed(10 + r))
        with pytest.raises(gradcomm.InvalidStateError, match="wrap the module again"):
            first(x)
        second = gct.DistributedDataParallel(net, comm)  # no first.close(), as with torch's DDP
        local = nn.Linear(64, 64)  # this rank's own gradients, for the expected average
        local.load_state_dict({k: v for k, v in net.state_dict().items() if k != "extra"})
        loss = lambda m, extra: ((m(x) + extra) ** 2).mean() * (r + 1)  # noqa: E731
        loss(second, net.extra).backward()
        extra = torch.ones(64, requires_grad=True)
        loss(local, extra).backward()
        got = [net.weight.grad.clone(), net.bias.grad.clone(), net.extra.grad.clone()]
        mine = [local.weight.grad, local.bias.grad, extra.grad]
        hooks = [post_accumulate_hooks(p) for p in net.parameters()]
        with pytest.raises(gradcomm.InvalidStateError, match="replaced by a newer wrapper"):
            first(x)
        second.close()
        return got, mine, hooks

    out = on_ranks(comms, rank)
    for k in range(3):
        expected = (out[0][1][k] + out[1][1][k]) / 2
        for r in range(2):
            worst = (out[r][0][k] - expected).abs().max().item()
            assert torch.allclose(out[r][0][k], expected, rtol=1e-5, atol=1e-6), (r, k, worst)
    assert out[0][2] == out[1][2] == [1, 1, 1], "one wrapper's hooks on each parameter"
    for c in comms:
        c.close()


def test_a_second_wrapper_takes_the_parameters_over_even_from_another_communicator():
    with gradcomm.init(0, 1, timeout=30) as a, gradcomm.init(0, 1, timeout=30) as b:
        net = nn.Linear(8, 8)
        first = gct.DistributedDataParallel(net, a)
        second = gct.DistributedDataParallel(net, b)
        assert first.reducer.closed and not second.reducer.closed
        second(torch.randn(2, 8)).sum().backward()
        assert net.weight.grad is not None
        first.close()  # closing a replaced wrapper is harmless and leaves the new one as it is
        second(torch.randn(2, 8)).sum().backward()
        second.close()


def resident_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def test_wrappers_dropped_without_close_are_freed():
    # Before: 12 of 12 dropped wrappers stayed alive (the parameters' hooks held
    # them), each with its gradient slots and buckets (+96 MiB per 8M parameters).
    with gradcomm.init(0, 1, timeout=30) as c:
        net = nn.Sequential(nn.Linear(1024, 1024), nn.Linear(1024, 1024))  # 2M parameters: 8 MiB of gradients
        refs = []
        gc.collect()
        before = resident_mib()
        for _ in range(12):
            model = gct.DistributedDataParallel(net, c)
            model(torch.randn(4, 1024)).sum().backward()
            refs.append(weakref.ref(model))
            del model
        gc.collect()
        alive = sum(r() is not None for r in refs)
        assert alive == 0, f"{alive} of 12 dropped wrappers are still alive"
        assert all(post_accumulate_hooks(p) == 0 for p in net.parameters()), "their hooks are gone too"
        # Each wrapper held ~16 MiB (slots and buckets): twelve leaked would be ~190 MiB.
        assert resident_mib() - before < 100
        net.zero_grad()
        net(torch.randn(4, 1024)).sum().backward()  # the module trains on without them


def test_the_default_communicator_goes_with_the_last_dropped_wrapper(launcher_env):
    model = gct.DistributedDataParallel(nn.Linear(8, 8))  # comm=None: the process's default
    model(torch.randn(2, 8)).sum().backward()
    assert _comm._defaults
    del model
    gc.collect()
    assert not _comm._defaults, "destroyed with its last user"
