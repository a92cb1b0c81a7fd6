"""Buckets sized for the link from Python: the DDP wrapper on a host link chooses
its bucket cap after the 4th synced step, the same on every rank, and trains as
before; a bucket_cap_mb the user gave is kept unless bucket_autotune=True; bad
values are refused by name."""
import pytest

torch = pytest.importorskip("torch")
from conftest import on_ranks  # noqa: E402

import gradcomm  # noqa: E402
import gradcomm.torch as gct  # noqa: E402


def _model():
    torch.manual_seed(0)  # ~4.2 MB of f32 gradients: above the autotune's 2 MiB floor
    return torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 768),
                               torch.nn.ReLU(), torch.nn.Linear(768, 8))


def _train(steps, **options):
    comms = gradcomm.init_local(2, "cpu", timeout=60)

    def body(rank, comm):
        model = gct.DistributedDataParallel(_model(), comm, **options)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        g = torch.Generator().manual_seed(rank)
        before = model.bucket_autotune()
        for _ in range(steps):
            x = torch.randn(32, 256, generator=g)
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
        after = model.bucket_autotune()
        params = torch.cat([p.detach().flatten() for p in model.parameters()])
        model.close()
        return before, after, params

    try:
        return on_ranks(comms, body)
    finally:
        for c in comms:
            c.close()


def test_the_default_buckets_are_chosen_for_the_link_alike_on_every_rank():
    out = _train(6)
    for before, after, _ in out:
        assert before.state == "measuring", before
        assert after.state == "chosen" and after.chosen_at_step == 4, after
        assert after.configured_cap_bytes == 25 << 20
        assert after.link_bytes_per_s > 0 and after.predicted_us <= after.predicted_configured_us * 1.0001, after
    assert len({a.bucket_cap_bytes for _, a, _ in out}) == 1, [a for _, a, _ in out]
    assert torch.equal(out[0][2], out[1][2]), "the ranks' parameters differ after the rebuild"


def test_a_cap_the_user_gave_is_kept_unless_the_autotune_is_asked_for():
    for _, after, _ in _train(5, bucket_cap_mb=4):
        assert after.state == "off" and after.bucket_cap_bytes == 4 << 20, after
    for _, after, _ in _train(5, bucket_cap_mb=4, bucket_autotune=True):
        assert after.state == "chosen" and after.configured_cap_bytes == 4 << 20, after
    for _, after, _ in _train(5, bucket_autotune=False):
        assert after.state == "off" and after.bucket_cap_bytes == 25 << 20, after


@pytest.mark.parametrize("options, words", [
    (dict(bucket_autotune="yes"), "bucket_autotune must be True or False"),
    (dict(bucket_cap_mb=0), "bucket_cap_mb must be a positive number of MiB (or None: 25, chosen for the link"),
    (dict(bucket_autotune=True, gradient_as_bucket_view=True), "the caller holds addresses into the first plan"),
])
def test_bad_autotune_options_are_refused_by_name(options, words):
    (comm,) = gradcomm.init_local(1, "cpu", timeout=10)
    try:
        with pytest.raises(gradcomm.InvalidArgumentError, match=words.replace("(", r"\(")):
            gct.DistributedDataParallel(_model(), comm, **options)
    finally:
        comm.close()
