"""gradcomm.torch on a GPU: NCCL with a world of one, local ranks on one GPU, and
processes sharing one GPU (the cuda-ipc transport).
Skipped, with the reason, where there is no GPU (the development machine and CI);
tools/gpu_check.sh's `python` stage runs it on a GPU machine."""
import threading

import pytest

torch = pytest.importorskip("torch")
import gradcomm  # noqa: E402
import gradcomm.torch as gct  # noqa: E402
from conftest import max_rel_diff, run_ranks  # noqa: E402
from test_outer_sync import train as train_outer_sync  # noqa: E402

if not torch.cuda.is_available() or gradcomm.cuda_device_count() == 0:
    pytest.skip("no GPU: torch.cuda.is_available() is False or gradcomm sees no device",
                allow_module_level=True)


def make(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).cuda()


@pytest.mark.parametrize("bucket_view", [False, True])
@pytest.mark.parametrize("wire", [None, torch.float16])
def test_world_of_one_over_nccl_equals_plain_training(bucket_view, wire):
    comm = gradcomm.init(0, 1, device="cuda:0", timeout=60)
    try:
        net, ref = make(), make()
        if bucket_view and wire is not None:
            # The gradients cannot live in a bucket whose elements are f16.
            with pytest.raises(gradcomm.InvalidArgumentError, match="grad_as_bucket_view needs the wire dtype"):
                gct.DistributedDataParallel(net, comm, gradient_as_bucket_view=True, wire_dtype=wire)
            return
        model = gct.DistributedDataParallel(net, comm, gradient_as_bucket_view=bucket_view, wire_dtype=wire)
        opt, ref_opt = torch.optim.Adam(net.parameters(), 1e-3), torch.optim.Adam(ref.parameters(), 1e-3)
        for step in range(10):
            x = torch.randn(32, 64, device="cuda")
            for o in (opt, ref_opt):
                o.zero_grad(set_to_none=step % 2 == 0)
            model(x).square().mean().backward()
            ref(x).square().mean().backward()
            opt.step()
            ref_opt.step()
        torch.cuda.synchronize()
        tol = 0 if wire is None else 2e-3
        for a, b in zip(net.parameters(), ref.parameters()):
            assert torch.allclose(a, b, rtol=tol, atol=tol)
        model.close()
    finally:
        comm.close()


def test_amp_on_the_current_stream_skips_an_overflow_step():
    comm = gradcomm.init(0, 1, device="cuda:0", timeout=60)
    net = make()
    model = gct.DistributedDataParallel(net, comm)
    scaler = gct.GradScaler(model, init_scale=2.0 ** 16)
    opt = torch.optim.SGD(net.parameters(), 0.1)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for step in range(3):
            opt.zero_grad()  # else step 1's Inf stays in the gradients and step 2 is skipped too
            with torch.autocast("cuda", dtype=torch.float16):
                loss = model(torch.randn(8, 64, device="cuda")).float().square().mean()
            if step == 1:
                loss = loss * float("inf")
            before = [p.detach().clone() for p in net.parameters()]
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            unchanged = all(torch.equal(a, b) for a, b in zip(before, net.parameters()))
            assert unchanged == (step == 1)
    assert scaler.get_scale() == 2.0 ** 15
    model.close()
    comm.close()


def test_ddp_refuses_local_ranks_on_one_gpu_instead_of_hanging():
    # All of a device's backward passes run on one PyTorch thread: rank 0's hook
    # would wait for rank 1's forever (it hung for the 60 s timeout on an H100).
    comms = gradcomm.init_local(2, "cuda:0", timeout=60)
    try:
        with pytest.raises(gradcomm.InvalidArgumentError, match="one thread"):
            gct.DistributedDataParallel(make(), comms[0])
    finally:
        for c in comms:
            c.close()


@pytest.mark.parametrize("world,args", [
    pytest.param(2, ["--opt", "adam", "--zero-grad", "mixed"], id="2p-adam"),
    pytest.param(3, ["--opt", "sgd_momentum", "--bucket-view", "--branch"], id="3p-bucket-view-unused"),
])
def test_processes_sharing_one_gpu_train_as_ddp_does(tmp_path, world, args):
    # Every process on cuda:0 (which NCCL refuses): gradcomm picks the cuda-ipc
    # transport; torch's DDP runs the same steps on the CPU (gloo) as the reference.
    results = run_ranks(tmp_path, world, "--device", "cuda:0", "--steps", "12", *args)
    for r in results:
        assert r["gradcomm_record"]["transport"] == "Transport.CudaIpc"
        assert r["gradcomm"] == results[0]["gradcomm"], f"rank {r['rank']} differs from rank 0"
    # GPU and CPU kernels round differently; the averaging itself is exact.
    assert max_rel_diff(results[0]["gradcomm"], results[0]["ddp"]) <= 1e-4


def test_local_ranks_on_one_gpu_average_through_the_reducer():
    # The supported way: each rank's thread runs backward, then drives its reducer.
    comms = gradcomm.init_local(2, "cuda:0", timeout=60)
    nets = [make(), make()]
    grads, errors = [None, None], []

    def rank(r):
        try:
            net = nets[r]
            net(torch.full((4, 64), float(r + 1), device="cuda")).sum().backward()
            params = list(net.parameters())
            specs = [(p.grad.data_ptr(), p.grad.numel(), gradcomm.DataType.Float32) for p in params]
            stream = torch.cuda.current_stream().cuda_stream
            with gradcomm.Reducer(comms[r], specs) as red:
                for _ in range(2):  # the second step reuses the buckets
                    red.begin_step()
                    for i in reversed(range(len(params))):
                        red.mark_ready(i, stream)
                    red.finalize(stream)
                    torch.cuda.current_stream().synchronize()
                    if grads[r] is None:
                        grads[r] = [p.grad.clone() for p in params]
        except BaseException as e:  # reported below, not lost in the thread
            errors.append(e)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in comms:
        c.close()
    assert not errors, errors
    ref = make()
    for r in range(2):
        ref(torch.full((4, 64), float(r + 1), device="cuda")).sum().backward()
    for g0, g1, p in zip(grads[0], grads[1], ref.parameters()):
        assert torch.equal(g0, g1)
        assert torch.allclose(g0, p.grad / 2, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("compression", [None, "fp4"])
def test_outer_sync_on_local_ranks_of_one_gpu(compression):
    # DiLoCo with the parameters in device memory: the pseudo-gradient and outer-step
    # kernels, the fragment's reducer on the local GPU transport, and the state's
    # round trip through device memory. Each rank fits a teacher on its own samples.
    out = train_outer_sync(compression, fragments=2, device="cuda:0", round_trip=True)
    for start, losses, synced, params, stats in out:
        assert all(torch.equal(a, b) for a, b in zip(start, out[0][0])), "rank 0's parameters at creation"
        assert sum(synced) == 16, "two fragments, each every 8 steps"
        # Fragment 1 (every tensor after the first weight) synced at step 64, fragment 0
        # at step 60 and moved apart since.
        assert all(torch.equal(a, b) for a, b in zip(params[1:], out[0][3][1:])), "identical after the last sync"
        assert stats["inner_steps"] == 64 and stats["syncs"] == 16 and stats["skipped_syncs"] == 0
        assert sum(losses[-8:]) < 0.5 * sum(losses[:8]), "it learns through the syncs"
