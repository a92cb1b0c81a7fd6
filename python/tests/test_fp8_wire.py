"""The fp8 wire from Python with no binding of its own: enabled by name and options
(the text form), its statistics as a dict, on three local ranks."""
import numpy as np
import pytest

import gradcomm
from conftest import on_ranks


@pytest.mark.parametrize("fmt,step", [("e4m3", 2.0 ** -4), ("e5m2", 2.0 ** -3)])  # half a step: 2^-(M+1)
def test_fp8_by_name_averages_within_its_format(fmt, step):
    comms = gradcomm.init_local(3, timeout=30)
    rng = np.random.default_rng(8)
    n = 3 * 2048
    inputs = [rng.standard_normal(n).astype(np.float32) for _ in comms]

    def work(r, c):
        g = inputs[r].copy()
        with gradcomm.Reducer(c, [(g.__array_interface__["data"][0], n, gradcomm.DataType.Float32)]) as red:
            red.enable_compression("fp8", format=fmt, block_size=128)
            red.begin_step()
            red.mark_ready(0)
            red.finalize()
            return red.compression(), red.compression_stats(), g

    expected = sum(inputs) / 3
    for kind, stats, got in on_ranks(comms, work):
        assert kind == "fp8" and stats["compressed_steps"] == 1
        assert 0.25 < stats["bytes_last_step"] / stats["f32_allreduce_bytes"] < 0.27
        # Two quantizations, each within half a step of its value's binade: each
        # rank's x/3 first, then the owner's sum (plus the subnormal steps' floor).
        terms = sum(np.abs(x) for x in inputs) / 3
        bound = step * (terms + np.abs(got)) * 1.01 + 1e-4
        assert np.all(np.abs(got - expected) <= bound), np.max(np.abs(got - expected) - bound)
        assert np.abs(got - expected).max() > 0, "a compressed wire that loses nothing is not compressing"
    with pytest.raises(gradcomm.InvalidArgumentError, match="not one of e4m3, e5m2"):
        with gradcomm.Reducer(comms[0], [(inputs[0].__array_interface__["data"][0], 4, gradcomm.DataType.Float32)]) as red:
            red.enable_compression("fp8", format="e3m4")
    for c in comms:
        c.close()
