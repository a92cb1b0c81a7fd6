"""The fp4 wire from Python with no binding of its own: enabled by name and options
(the text form), its statistics as a dict, on three local ranks; and through the
DDP wrapper's compression= on a real model."""
import numpy as np
import pytest

import gradcomm
from conftest import on_ranks


def test_fp4_by_name_averages_within_its_format():
    comms = gradcomm.init_local(3, timeout=30)
    rng = np.random.default_rng(9)
    n = 3 * 2048
    inputs = [rng.standard_normal(n).astype(np.float32) for _ in comms]

    def work(r, c):
        g = inputs[r].copy()
        with gradcomm.Reducer(c, [(g.__array_interface__["data"][0], n, gradcomm.DataType.Float32)]) as red:
            red.enable_compression("fp4", block_size=64)
            red.begin_step()
            red.mark_ready(0)
            red.finalize()
            return red.compression(), red.compression_stats(), g

    expected = sum(inputs) / 3
    for kind, stats, got in on_ranks(comms, work):
        assert kind == "fp4" and stats["compressed_steps"] == 1
        assert stats["bytes_last_step"] / stats["f32_allreduce_bytes"] == pytest.approx((0.5 + 4 / 64) / 4)
        # Two quantizations, each within half a step of its value's binade (a quarter
        # of it for e2m1's one mantissa bit) or a quarter of the block's scale (max/6):
        # each rank's x/3 first, then the owner's sum.
        blocks = lambda v: np.repeat(np.abs(v).reshape(-1, 64).max(axis=1) / 6, 64)  # noqa: E731
        terms = sum(np.maximum(np.abs(x) / 3, blocks(x / 3)) for x in inputs)
        bound = (terms + np.maximum(np.abs(got), blocks(got))) / 4 * 1.01
        assert np.all(np.abs(got - expected) <= bound), np.max(np.abs(got - expected) - bound)
        assert np.abs(got - expected).max() > 0, "a compressed wire that loses nothing is not compressing"
    with pytest.raises(gradcomm.InvalidArgumentError, match="power of two"):
        with gradcomm.Reducer(comms[0], [(inputs[0].__array_interface__["data"][0], 4, gradcomm.DataType.Float32)]) as red:
            red.enable_compression("fp4", block_size=16)
    for c in comms:
        c.close()


def test_the_wrapper_trains_through_the_fp4_wire():
    """compression="fp4" through the DDP wrapper on three CPU ranks: every rank holds
    the same gradients, and a regression to a teacher (fresh samples each step) learns
    about as well as over the f32 wire: error feedback carries what the codes lose."""
    torch = pytest.importorskip("torch")
    import gradcomm.torch as gct

    def train(compression):
        comms = gradcomm.init_local(3, "cpu", timeout=60)
        torch.manual_seed(0)
        teacher = torch.nn.Linear(32, 4)
        nets = [torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 4)) for _ in comms]
        for n in nets[1:]:
            n.load_state_dict(nets[0].state_dict())

        def rank(r, c):
            model = gct.DistributedDataParallel(nets[r], c, compression=compression)
            opt = torch.optim.SGD(nets[r].parameters(), lr=0.05)
            gen = torch.Generator().manual_seed(100 + r)
            losses = []
            for _ in range(60):
                x = torch.randn(16, 32, generator=gen)
                with torch.no_grad():
                    y = teacher(x)
                opt.zero_grad()
                loss = (model(x) - y).square().mean()
                loss.backward()
                opt.step()
                losses.append(loss.item())
            grads = [p.grad.clone() for p in nets[r].parameters()]
            kind, stats = model.reducer.compression(), model.reducer.compression_stats()
            model.close()
            return (kind, stats), (sum(losses[:5]) / 5, sum(losses[-10:]) / 10), grads

        out = on_ranks(comms, rank)
        for c in comms:
            c.close()
        for (kind, stats), _, grads in out:
            assert kind == (compression or "none")
            if compression:  # every step quantized, at less than a fifth of the f32 bytes
                assert stats["compressed_steps"] == 60, stats
                assert stats["bytes_last_step"] < 0.2 * stats["f32_allreduce_bytes"], stats
            assert all(torch.equal(a, b) for a, b in zip(grads, out[0][2]))
        return sum(o[1][0] for o in out) / 3, sum(o[1][1] for o in out) / 3

    (_, f32), (first, fp4) = train(None), train("fp4")
    assert fp4 < 0.5 * first, f"the fp4 wire did not learn: from {first} to {fp4}"
    assert fp4 < 1.5 * f32, f"fp4 {fp4} against f32 {f32}"
