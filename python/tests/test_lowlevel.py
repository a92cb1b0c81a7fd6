"""The low-level API on the host: communicators (local transport, ranks as
threads), the reducer, the grad scaler and the allocator; handles closed by
close(), by `with` and by the garbage collector."""
import gc

import numpy as np
import pytest

import gradcomm
from conftest import on_ranks


@pytest.fixture
def comms():
    cs = gradcomm.init_local(3, timeout=30)
    yield cs
    for c in cs:
        c.close()


def test_collectives_on_numpy_arrays(comms):
    rng = np.random.default_rng(1)
    data = [rng.standard_normal(1001).astype(np.float32) for _ in comms]

    def work(r, c):
        a = data[r].copy()
        c.all_reduce(a, op="sum")
        b = np.full(7, r, dtype=np.float32)
        c.broadcast(b, root=2)
        g = np.empty(3 * 5, dtype=np.float32)
        c.all_gather(np.full(5, r, dtype=np.float32), g)
        s = np.empty(4, dtype=np.float32)
        c.reduce_scatter(np.arange(12, dtype=np.float32), s, op="sum")
        c.barrier()
        return a, b, g, s

    for r, (a, b, g, s) in enumerate(on_ranks(comms, work)):
        np.testing.assert_allclose(a, sum(data), rtol=1e-6, atol=1e-6)
        assert (b == 2).all()
        assert list(g) == [0] * 5 + [1] * 5 + [2] * 5
        assert list(s) == [3 * x for x in range(4 * r, 4 * r + 4)]
    assert comms[0].rank == 0 and comms[2].world_size == 3 and "local" in repr(comms[0])


def test_all_to_all_moves_block_q_to_rank_q(comms):
    n = len(comms)

    def step(r, c):
        x = np.arange(n * 3, dtype=np.float32) + 100 * r  # block q: 100 r + 3 q + (0, 1, 2)
        out = np.full(n * 3, -1, dtype=np.float32)
        c.all_to_all(x, out)
        return out

    outs = on_ranks(comms, step)
    for r in range(n):
        want = np.concatenate([100 * q + 3 * r + np.arange(3, dtype=np.float32) for q in range(n)])
        assert np.array_equal(outs[r], want), (r, outs[r])

    def in_place(r, c):
        x = np.zeros(n * 2, dtype=np.float32)
        with pytest.raises(gradcomm.InvalidArgumentError, match="overlap"):
            c.all_to_all(x, x)
    on_ranks(comms, in_place)


def test_send_and_recv_in_a_ring_and_in_pairs(comms):
    n = len(comms)

    def step(r, c):
        right, left = (r + 1) % n, (r - 1) % n
        got = np.full(5, -1, dtype=np.float32)
        with gradcomm.group():  # every rank sends first: only a group lets that complete
            c.send(np.full(5, r, dtype=np.float32), right)
            c.recv(got, left)
        pair = np.zeros(2, dtype=np.float32)
        if r == 0:
            c.send(np.array([7, 8], dtype=np.float32), 1)
        elif r == 1:
            c.recv(pair, 0)
        return got, pair

    outs = on_ranks(comms, step)
    for r, (got, pair) in enumerate(outs):
        assert (got == (r - 1) % n).all(), (r, got)
    assert list(outs[1][1]) == [7, 8]

    def bad(r, c):
        if r != 0:
            return
        with pytest.raises(gradcomm.InvalidArgumentError, match="peer 3 is not a rank"):
            c.send(np.zeros(2, dtype=np.float32), 3)
        with pytest.raises(gradcomm.InvalidArgumentError, match="same group"):
            c.recv(np.zeros(2, dtype=np.float32), 0)
        with pytest.raises(ValueError, match="inside"):  # the block's error wins over the group's
            with gradcomm.group():
                raise ValueError("inside")
    on_ranks(comms, bad)


def test_bad_buffers_raise_before_any_collective(comms):
    c = comms[0]
    with pytest.raises(gradcomm.InvalidArgumentError, match="dtype float64"):
        c.all_reduce(np.zeros(4))
    with pytest.raises(gradcomm.InvalidArgumentError, match="not C-contiguous"):
        c.all_reduce(np.zeros((4, 4), dtype=np.float32)[:, 1])
    with pytest.raises(gradcomm.InvalidArgumentError, match="must be a torch.Tensor or a numpy array"):
        c.all_reduce([1.0, 2.0])
    with pytest.raises(gradcomm.InvalidArgumentError, match="op 'mean'"):
        c.all_reduce(np.zeros(4, dtype=np.float32), op="mean")
    with pytest.raises(gradcomm.InvalidArgumentError, match="world_size"):
        c.all_gather(np.zeros(4, dtype=np.float32), np.zeros(4, dtype=np.float32))


def test_reducer_averages_and_reports_stats(comms):
    rng = np.random.default_rng(2)
    sizes = (3, 1000, 17)
    inputs = [[[rng.standard_normal(n).astype(np.float32) for n in sizes] for _ in comms] for _ in range(2)]

    def work(r, c):
        grads = [np.empty(n, dtype=np.float32) for n in sizes]
        specs = [(g.__array_interface__["data"][0], g.size, gradcomm.DataType.Float32) for g in grads]
        results = []
        with gradcomm.Reducer(c, specs, bucket_cap_bytes=4096, first_bucket_bytes=64) as red:
            for step in range(2):
                for g, x in zip(grads, inputs[step][r]):
                    g[:] = x
                red.begin_step()
                for i in reversed(range(3)):
                    red.mark_ready(i, data=grads[i].__array_interface__["data"][0])
                red.finalize()
                results.append([g.copy() for g in grads])
            return red.stats(), red.describe(), results

    for stats, plan, results in on_ranks(comms, work):
        assert stats.synced_steps == 2 and stats.num_buckets >= 2
        assert "bucket" in plan
        for step in range(2):
            for i in range(3):
                expected = sum(inputs[step][r][i] for r in range(3)) / 3
                np.testing.assert_allclose(results[step][i], expected, rtol=1e-6, atol=1e-6)


def test_compression_by_name_with_stats_and_state(comms):
    """The generic compression API: enabled by name and options, statistics as a dict,
    state bytes that another reducer of the same layout loads, refusals that name the
    fix and change nothing."""
    rng = np.random.default_rng(5)
    n = 3 * 4096
    inputs = [[rng.standard_normal(n).astype(np.float32) for _ in comms] for _ in range(3)]

    def work(r, c):
        g = np.empty(n, dtype=np.float32)
        specs = [(g.__array_interface__["data"][0], n, gradcomm.DataType.Float32)]
        with gradcomm.Reducer(c, specs) as red:
            assert red.compression() == "none" and red.compression_stats() == {}
            with pytest.raises(gradcomm.InvalidArgumentError, match="block_size, error_feedback, start_iter"):
                red.enable_compression("int8", block=128)
            with pytest.raises(gradcomm.InvalidArgumentError, match="not one of none, powersgd, int8"):
                red.enable_compression("int4")
            with pytest.raises(gradcomm.InvalidArgumentError, match="needs grad_rows"):
                red.enable_compression("powersgd", rank=2)
            assert red.compression() == "none"
            red.enable_compression("int8", block_size=128, error_feedback=True)
            with pytest.raises(gradcomm.InvalidStateError, match="already compresses with int8"):
                red.enable_compression("powersgd", rows=[0], rank=2)
            results = []
            for step in range(3):
                g[:] = inputs[step][r]
                red.begin_step()
                red.mark_ready(0)
                red.finalize()
                results.append(g.copy())
            return red.compression(), red.compression_stats(), red.compression_state(), results

    out = on_ranks(comms, work)
    for kind, stats, state, results in out:
        assert kind == "int8"
        assert stats["compressed_steps"] == 3 and stats["compressed_buckets"] >= 1
        assert 0 < stats["bytes_last_step"] < 0.3 * stats["f32_allreduce_bytes"]
        for step in range(3):  # int8 codes: close to the average, not equal
            expected = sum(inputs[step][q] for q in range(3)) / 3
            assert np.abs(results[step] - expected).max() < 0.05 * np.abs(expected).max()
    states = [o[2] for o in out]

    def reload(r, c):
        g = np.zeros(n, dtype=np.float32)
        with gradcomm.Reducer(c, [(g.__array_interface__["data"][0], n, gradcomm.DataType.Float32)]) as red:
            with pytest.raises(gradcomm.InvalidStateError, match="no compression is enabled"):
                red.load_compression_state(states[r])
            red.enable_compression("int8", block_size=128)
            red.load_compression_state(states[r])
            with pytest.raises(gradcomm.InvalidArgumentError, match="rank"):
                red.load_compression_state(states[(r + 1) % 3])  # another rank's
            return red.compression_state()

    assert on_ranks(comms, reload) == states


def test_mark_ready_at_a_moved_address_is_refused(comms):
    def work(r, c):
        g = np.ones(8, dtype=np.float32)
        other = np.ones(8, dtype=np.float32)
        red = gradcomm.Reducer(c, [(g.__array_interface__["data"][0], 8, gradcomm.DataType.Float32)],
                               unused="zero")
        red.begin_step()
        with pytest.raises(gradcomm.InvalidArgumentError, match="0x"):
            red.mark_ready(0, data=other.__array_interface__["data"][0])
        red.finalize()
        red.close()

    on_ranks(comms, work)


def test_grad_scaler_state_round_trip():
    with gradcomm.GradScaler(init_scale=8.0, growth_interval=2) as s:
        s.update()
        st = s.state()
        assert (st.scale, st.growth_tracker) == (8.0, 1)
        st.scale, st.growth_tracker = 64.0, 1
        s.set_state(st)
        s.update()
        assert s.state().scale == 128.0
        st.growth_tracker = 5
        with pytest.raises(gradcomm.InvalidArgumentError, match="growth_tracker"):
            s.set_state(st)
    assert s.closed
    with pytest.raises(gradcomm.InvalidStateError, match="closed"):
        s.update()


def test_allocator_stats_and_summary():
    a = gradcomm.Allocator("cpu", kind="host")
    p = a.malloc(1 << 20)
    st = a.stats()
    assert st.allocated_bytes.current >= 1 << 20 and st.malloc_calls == 1
    assert "caching allocator" in a.summary()
    with pytest.raises(gradcomm.InvalidStateError, match="still has 1 blocks"):
        a.close()  # refused while a block is held: the allocator stays usable
    a.free(p)
    a.close()


def test_handles_are_released_by_the_garbage_collector():
    s = gradcomm.GradScaler()
    fin = s._finalizer
    del s
    gc.collect()
    assert not fin.alive


def test_a_reducer_keeps_its_communicator_alive_until_destroyed():
    (c,) = gradcomm.init_local(1)
    g = np.ones(4, dtype=np.float32)
    red = gradcomm.Reducer(c, [(g.__array_interface__["data"][0], 4, gradcomm.DataType.Float32)])
    comm_fin = c._finalizer
    del c
    gc.collect()
    assert comm_fin.alive, "the reducer still needs its communicator"
    del red
    gc.collect()
    assert not comm_fin.alive


def test_environment_report_and_devices():
    assert "gradcomm" in gradcomm.environment_report()
    assert gradcomm.cuda_device_count() >= 0


def test_environment_as_a_dict_agrees_with_nccl_version():
    env = gradcomm.environment()
    assert env["gradcomm"] == gradcomm.__version__
    assert isinstance(env["gpus"], list) and len(env["gpus"]) == gradcomm.cuda_device_count()
    if env["nccl"]["loaded"] is None:
        # No NCCL here: asking for it names where it looked.
        with pytest.raises(gradcomm.NotSupportedError, match="Searched, in order"):
            gradcomm.nccl_version()
        assert "Searched, in order" in env["nccl"]["error"]
    else:
        built, loaded = gradcomm.nccl_version()
        assert "%d.%d.%d" % (loaded // 10000, loaded // 100 % 100, loaded % 100) == env["nccl"]["loaded"]
        assert env["nccl"]["path"]


def test_a_world_of_one_does_not_need_port_29500():
    # On a GPU machine an earlier test's store held 29500 and every later
    # gradcomm.init(0, 1) failed with "Address already in use": a world of one
    # now listens on any free port unless a port is given.
    import socket
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        holder.bind(("127.0.0.1", 29500))
        holder.listen(1)
    except OSError:
        pass  # something else holds it already: the same situation
    try:
        with gradcomm.init(0, 1) as c:
            x = np.arange(4, dtype=np.float32)
            c.all_reduce(x)
            assert x.tolist() == [0, 1, 2, 3]
    finally:
        holder.close()


def test_flight_record_names_the_last_collectives(tmp_path):
    cs = gradcomm.init_local(2, timeout=30)
    try:
        on_ranks(cs, lambda r, c: [c.all_reduce(np.ones(8, dtype=np.float32)) for _ in range(3)])
        rec = cs[1].flight_record()
        assert rec["rank"] == 1 and rec["size"] == 2 and rec["transport"] == "local"
        assert [e["seq"] for e in rec["entries"]] == [1, 2, 3]
        assert all(e["state"] == "completed" and e["op"] == "all-reduce" for e in rec["entries"])
        path = tmp_path / "rank1.json"
        cs[1].dump_flight_record(path)
        assert '"last_completed_seq": 3' in path.read_text()
    finally:
        for c in cs:
            c.close()


def test_step_timing_and_trace(comms, tmp_path):
    """Timing is on by default on the host; the trace is one JSON file per rank."""
    import json
    import time

    pattern = str(tmp_path / "trace_%r.json")

    def work(r, c):
        grads = [np.ones(n, dtype=np.float32) for n in (500, 500, 500)]
        specs = [(g.__array_interface__["data"][0], g.size, gradcomm.DataType.Float32) for g in grads]
        with gradcomm.Reducer(c, specs, bucket_cap_bytes=2000, first_bucket_bytes=2000,
                              rebuild_buckets=False) as red:
            assert red.step_timing().step == 0
            red.start_trace(pattern, steps=2)
            for _ in range(2):
                red.begin_step()
                for i in reversed(range(3)):  # buckets launch while marking goes on
                    red.mark_ready(i)
                    time.sleep(0.002)  # backward making the next gradient: the lane starts the bucket meanwhile
                red.finalize()
            red.stop_trace()
            return red.step_timing()

    for t in on_ranks(comms, work):
        assert t.step == 2 and t.measured_steps == 2 and t.stride == 1  # a few clock reads: within budget
        assert 0 < t.overlap <= 1 and t.comm_us > 0 and t.backward_us <= t.step_us
    for r in range(len(comms)):
        doc = json.loads((tmp_path / f"trace_{r}.json").read_text())
        names = {e["name"] for e in doc["traceEvents"]}
        assert {"step 1", "step 2", "ready", "pack", "all_reduce", "epilogue"} <= names


_GROUP_RESIZE = r"""
import sys, threading
import torch, gradcomm
mode = sys.argv[1]
comms = gradcomm.init_local(2, timeout=20)
out = {}
def rank(r, c):
    try:
        if r == 0:
            t = torch.zeros(256)
            with gradcomm.group():
                c.recv(t, 1)
                if mode == "resize":
                    t.resize_(1 << 22)  # frees the memory the receive was given
                else:
                    t.set_(torch.full((256,), -1.0))  # points the tensor elsewhere
            out[r] = "no error"
        else:
            s = torch.arange(256, dtype=torch.float32)
            with gradcomm.group():
                c.send(s, 0)
                s.resize_(1 << 22)  # the send must still carry 0..255
            out[r] = "sent"
    except gradcomm.Error as e:
        out[r] = str(e)
threads = [threading.Thread(target=rank, args=(r, c)) for r, c in enumerate(comms)]
[t.start() for t in threads]
[t.join() for t in threads]
print(out[0]); print(out[1])
"""


@pytest.mark.parametrize("mode", ["resize", "set"])
def test_a_tensor_changed_inside_a_group_neither_crashes_nor_receives_garbage(mode):
    """resize_ or set_ on a tensor given to recv/send inside gradcomm.group(): the
    receive is refused with the reason at the group's end (the tensor's new memory
    is not written), and the send carries the values it was given. Before the fix:
    SIGSEGV in the local transport's receive (resize_), garbage (set_)."""
    torch = pytest.importorskip("torch")  # noqa: F841
    import subprocess
    import sys
    run = subprocess.run([sys.executable, "-c", _GROUP_RESIZE, mode], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"exit {run.returncode}: {run.stderr[-2000:]}"
    first, second = run.stdout.splitlines()[:2]
    assert "changed inside gradcomm.group()" in first and "not written" in first, first
    assert second == "sent", second


def test_group_receives_refused_or_into_parameters():
    """Inside gradcomm.group(): a receive the communicator refuses writes nothing at
    the end, and a receive into a parameter that requires grad is delivered (raw
    bytes, as outside a group), with every other receive of the group."""
    torch = pytest.importorskip("torch")
    comms = gradcomm.init_local(2, timeout=20)

    def work(r, c):
        if r == 0:
            kept = torch.ones(4)
            p = torch.nn.Parameter(torch.zeros(4))
            plain = torch.zeros(4)
            with pytest.raises(gradcomm.InvalidArgumentError):
                with gradcomm.group():
                    c.recv(kept, 7)  # no rank 7: refused at the call
            with gradcomm.group():
                c.recv(p, 1)
                c.recv(plain, 1)
            return kept.tolist(), p.detach().tolist(), plain.tolist(), p.requires_grad
        with gradcomm.group():
            c.send(torch.arange(4, dtype=torch.float32), 0)
            c.send(torch.full((4,), 2.0), 0)
        return None

    kept, p, plain, requires_grad = on_ranks(comms, work)[0]
    assert kept == [1.0] * 4, "a refused receive wrote its tensor"
    assert p == [0.0, 1.0, 2.0, 3.0] and requires_grad
    assert plain == [2.0] * 4
    for c in comms:
        c.close()


def test_divergence_check_names_the_rank_and_the_tensor(comms):
    """Each rank hashes its tensors (any byte count, several 64 KiB chunks) and every
    rank reports the same: the rank off the majority and its first differing tensor."""
    def work(r, c, flip):
        a = np.arange(1001, dtype=np.float32)
        b = np.linspace(-1, 1, 70001, dtype=np.float32)
        odd = np.arange(3, dtype=np.float16)  # 6 bytes
        if r == flip:
            b.view(np.uint32)[50000] ^= 1  # one bit
        return c.check_divergence([a, b, odd], names=["a", "b", "odd"])

    for rep in on_ranks(comms, lambda r, c: work(r, c, -1)):
        assert rep.agreed and rep.ranks == {} and rep.first_mismatch == (-1, -1, -1)
        assert "agree on all 3 tensors" in str(rep)
    for rep in on_ranks(comms, lambda r, c: work(r, c, 1)):
        assert not rep.agreed and rep.mismatched == 1 and rep.ranks == {1: "b"}
        assert rep.first_mismatch == (-1, 1, -1)
        assert "rank 1 (first at 'b')" in str(rep), str(rep)
    with pytest.raises(gradcomm.InvalidArgumentError, match="2 names for 1 tensors"):
        comms[0].check_divergence([np.zeros(4, dtype=np.float32)], names=["x", "y"])
