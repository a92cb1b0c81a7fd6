"""gradcomm's bucket plan against DDP's own planner (torch.distributed's
_compute_bucket_assignment_by_size, which DDP's reducer runs when it rebuilds its
buckets in the order gradients became ready): for models whose gradients are all
smaller than the cap, the same buckets. docs/reducer.md lists where they differ; the
one these models can show: a gradient of at least the cap has a bucket of its own in
gradcomm's plan.

Until 2026-11-28 a gradient between the first bucket's cap and the cap closed the
first bucket before it, which left the network lab's mlp a first bucket of 22 KB
and its 4 MB gradient waiting in a 37.8 MB bucket."""
import re

import numpy as np
import pytest

import gradcomm

torch = pytest.importorskip("torch")
if not torch.distributed.is_available():
    pytest.skip("this torch has no torch.distributed (DDP's planner)", allow_module_level=True)
dist = torch.distributed

MB = 1 << 20


def mlp():
    nn = torch.nn
    widths = [1024, 2048, 2048, 2048, 512]
    layers = []
    for i, o in zip(widths, widths[1:]):
        layers += [nn.Linear(i, o), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(widths[-1], 10))


def conv():
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(3, 32, 3), nn.Conv2d(32, 64, 3), nn.BatchNorm2d(64), nn.Conv2d(64, 128, 3),
                         nn.Conv2d(128, 256, 3), nn.Flatten(), nn.Linear(256 * 4 * 4, 1024), nn.Linear(1024, 10))


def transformer():
    nn = torch.nn
    layer = nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048)
    return nn.Sequential(nn.Embedding(8000, 512), nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False),
                         nn.Linear(512, 8000))


def ddp_plan(params, first, cap):
    """DDP's buckets for gradients ready in reverse registration order, as lists of
    parameter indices in ready order."""
    ready = list(reversed(range(len(params))))
    buckets, _ = dist._compute_bucket_assignment_by_size([params[i] for i in ready], [first, cap],
                                                          [False] * len(params), ready)
    return [list(b) for b in buckets]


def gradcomm_plan(sizes, first, cap):
    """gradcomm's buckets for f32 gradients of these sizes, from its plan's description
    (each bucket: its tensor count and first gradients; buckets take gradients in
    reverse order, so these name every member)."""
    grads = [np.empty(n, dtype=np.float32) for n in sizes]
    specs = [(g.__array_interface__["data"][0], g.size, gradcomm.DataType.Float32) for g in grads]
    (c,) = gradcomm.init_local(1)
    with c, gradcomm.Reducer(c, specs, bucket_cap_bytes=cap, first_bucket_bytes=first) as red:
        text = red.describe()
    buckets, expected_next = [], len(sizes) - 1
    for line in text.splitlines():
        if not line.startswith("bucket "):
            continue  # the heading
        m = re.match(r"bucket \d+: \S+ -> \S+, (\d+) tensors, \d+ bytes, gradients ([\d ]+)", line)
        assert m, line
        count, shown = int(m.group(1)), [int(x) for x in m.group(2).split()]
        members = list(range(expected_next, expected_next - count, -1))
        assert shown == members[:len(shown)], f"bucket not contiguous in reverse order: {line}"
        buckets.append(members)
        expected_next -= count
    assert expected_next == -1, text
    return buckets


@pytest.mark.parametrize("build", [mlp, conv, transformer], ids=lambda f: f.__name__)
@pytest.mark.parametrize("first,cap", [(1 * MB, 25 * MB), (25 * MB, 25 * MB), (MB // 4, 40 * MB)],
                         ids=["ddp_default", "first_equals_cap", "other_caps"])
def test_the_same_buckets_as_ddp(build, first, cap):
    torch.manual_seed(0)
    params = list(build().parameters())
    sizes = [p.numel() for p in params]
    assert max(sizes) * 4 < cap, "a gradient of at least the cap is alone in gradcomm's plan, not in DDP's"
    assert gradcomm_plan(sizes, first, cap) == ddp_plan(params, first, cap)


def test_a_gradient_of_at_least_the_cap_has_a_bucket_of_its_own():
    """A difference on purpose: DDP puts a 16 MB embedding in the bucket that was open
    (so the small gradients before it wait for it); gradcomm closes that bucket first."""
    torch.manual_seed(0)
    params = list(transformer().parameters())
    sizes = [p.numel() for p in params]
    cap = 8 * MB
    big = [i for i, n in enumerate(sizes) if n * 4 >= cap]
    assert big, "the model has no gradient of at least the cap"
    ours = gradcomm_plan(sizes, MB, cap)
    for i in big:
        assert [i] in ours, ours
    assert any(len(b) > 1 and set(big) & set(b) for b in ddp_plan(params, MB, cap))
