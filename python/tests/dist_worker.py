"""One rank of a multi-process test: runs a scenario with torch's DDP (gloo) and
with gradcomm.torch on the same model, data and seeds, and writes what the test
compares to <outdir>/rank<r>.json. Started by conftest.run_ranks."""
import argparse
import contextlib
import json
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import gradcomm
import gradcomm.torch as gct


class Net(nn.Module):
    """Linear layers, a conv, a LayerNorm and an optional branch (unused parameters)."""

    def __init__(self, branch=False):
        super().__init__()
        self.conv = nn.Conv1d(2, 4, 3, padding=1)
        self.fc1 = nn.Linear(32, 48)
        self.norm = nn.LayerNorm(48)
        self.fc2 = nn.Linear(48, 10)
        self.branch = nn.Linear(48, 10) if branch else None

    def forward(self, x, use_branch=False):
        h = torch.relu(self.conv(x.view(-1, 2, 16))).view(-1, 4 * 16)[:, :32]
        h = self.norm(torch.tanh(self.fc1(h)))
        out = self.fc2(h)
        if use_branch:
            out = out + self.branch(h)
        return out


def batch(step, rank, world):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(8, 32, generator=g)
    y = torch.randn(8, 10, generator=g)
    return x, y


def make_optimizer(kind, params):
    if kind == "adam":
        return torch.optim.Adam(params, lr=1e-2)
    return torch.optim.SGD(params, lr=0.05, momentum=0.9 if kind == "sgd_momentum" else 0.0)


def clear_grads(model, opt, mode, step):
    """Every way PyTorch code clears or replaces gradients."""
    if mode == "none":
        opt.zero_grad()  # set_to_none=True, the default
    elif mode == "zero":
        opt.zero_grad(set_to_none=False)
    elif mode == "assign":  # user code assigning .grad (fresh zeros, non-contiguous on odd steps)
        for p in model.parameters():
            z = torch.zeros_like(p)
            if step % 2 and p.dim() == 2:
                z = torch.zeros(p.shape[1], p.shape[0], device=p.device).t()
            p.grad = z
    elif mode == "mixed":
        clear_grads(model, opt, ("none", "zero", "assign")[step % 3], step)
    else:
        raise ValueError(mode)


def use_branch(step, rank):
    return (step + rank) % 3 == 0  # some ranks skip the branch in some steps


def train(model, opt, args, rank, world, steps, scaler=None, start=0, record=None, inject=(), device="cpu"):
    for step in range(start, start + steps):
        clear_grads(model, opt, args.zero_grad, step)
        for micro in range(args.accumulate):
            x, y = (t.to(device) for t in batch(step * args.accumulate + micro, rank, world))
            last = micro == args.accumulate - 1
            ctx = contextlib.nullcontext() if last else model.no_sync()
            with ctx:
                out = model(x, use_branch=use_branch(step, rank)) if args.branch else model(x)
                loss = ((out - y) ** 2).mean()
                if step in inject and rank == (1 % world) and last:
                    loss = loss * float("inf")
                (scaler.scale(loss) if scaler is not None else loss).backward()
        if record is not None and args.record_grads:
            record.setdefault("grads", []).append(
                [p.grad.detach().clone().reshape(-1).tolist() for p in model.parameters() if p.grad is not None])
        if scaler is not None:
            scaler.step(opt)
            scaler.update()
            if record is not None:
                record.setdefault("scale", []).append(scaler.get_scale())
        else:
            opt.step()
    return model


def params_of(module):
    return [p.detach().cpu().reshape(-1).tolist() for p in module.parameters()]


def init_model(args):
    torch.manual_seed(7)
    return Net(branch=args.branch)


def run_ddp(args, rank, world, record):
    model = init_model(args)
    hook_state = None
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=args.bucket_mb,
                                                    find_unused_parameters=args.branch)
    if args.wire == "f16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    if args.powersgd:
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as ps
        hook_state = ps.PowerSGDState(process_group=None, matrix_approximation_rank=args.powersgd_rank,
                                      start_powerSGD_iter=args.powersgd_start, min_compression_rate=0.5,
                                      use_error_feedback=True, warm_start=True, random_seed=0,
                                      batch_tensors_with_same_shape=False)
        ddp.register_comm_hook(hook_state, ps.powerSGD_hook)
    opt = make_optimizer(args.opt, ddp.parameters())
    scaler = None
    if args.amp:
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=3)
    train(ddp, opt, args, rank, world, args.steps, scaler=scaler, record=record, inject=args.inject)
    return params_of(model)


def make_gradcomm(args, comm, model):
    compression = None
    if args.powersgd:
        compression = dict(kind="powersgd", rank=args.powersgd_rank, start_iter=args.powersgd_start,
                           min_compression_rate=0.5)
    ddp = gct.DistributedDataParallel(model, comm, bucket_cap_mb=args.bucket_mb, first_bucket_mb=args.bucket_mb,
                                      gradient_as_bucket_view=args.bucket_view,
                                      unused_parameters="zero" if args.branch else "error",
                                      wire_dtype=torch.float16 if args.wire == "f16" else None,
                                      compression=compression)
    scaler = gct.GradScaler(ddp, init_scale=2.0 ** 10, growth_interval=3) if args.amp else None
    return ddp, scaler


def run_gradcomm(args, rank, world, record):
    # On a GPU every process is on args.device: gradcomm's cuda-ipc transport.
    comm = gradcomm.init(rank, world, master_port=args.gc_port, timeout=60, device=args.device)
    record["transport"] = str(comm.transport)
    model = init_model(args).to(args.device)
    ddp, scaler = make_gradcomm(args, comm, model)
    opt = make_optimizer(args.opt, ddp.parameters())
    if args.resume:  # steps checkpoint_at .. steps-1 from a checkpoint, in fresh processes
        ck = torch.load(os.path.join(args.outdir, f"ckpt{rank}.pt"), weights_only=False)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        ddp.load_comm_state_dict(ck["comm"])
        if scaler is not None:
            scaler.load_state_dict(ck["scaler"])
        train(ddp, opt, args, rank, world, args.steps - args.checkpoint_at, scaler=scaler, start=args.checkpoint_at,
              record=record, inject=args.inject)
    elif args.checkpoint_at:
        train(ddp, opt, args, rank, world, args.checkpoint_at, scaler=scaler, record=record, inject=args.inject)
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "comm": ddp.comm_state_dict(),
                    "scaler": scaler.state_dict() if scaler is not None else None},
                   os.path.join(args.outdir, f"ckpt{rank}.pt"))
    else:
        train(ddp, opt, args, rank, world, args.steps, scaler=scaler, record=record, inject=args.inject,
              device=args.device)
    if args.powersgd:
        record["powersgd_compressed_steps"] = ddp.reducer.compression_stats()["compressed_steps"]
    out = params_of(model)
    ddp.close()
    comm.close()
    return out


def run_unused_error(args, rank, world, record):
    """unused_parameters='error': the step raises, naming the parameters, and the model stays usable."""
    comm = gradcomm.init(rank, world, master_port=args.gc_port, timeout=60)
    torch.manual_seed(7)
    model = Net(branch=True)
    ddp = gct.DistributedDataParallel(model, comm)
    x, y = batch(0, rank, world)
    try:
        ((ddp(x, use_branch=rank == 0) - y) ** 2).mean().backward()
        record["raised"] = None
    except gct.UnusedParametersError as e:
        record["raised"] = sorted(e.names)
        record["message"] = str(e)
    ((ddp(x, use_branch=True) - y) ** 2).mean().backward()  # everything used: a normal step
    record["after"] = ddp.reducer.stats().synced_steps
    ddp.close()
    comm.close()


def run_shared_default(args, rank, world, record):
    """Several users of the default communicator (init_from_env twice, two wrapped
    models with comm=None, as a GAN or an EMA copy has), then 20 cycles of closing
    it and making a new one with the ranks out of step."""
    import time
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(args.gc_port))
    first = gradcomm.init_from_env(timeout=60)
    second = gradcomm.init_from_env()  # before the default was shared: "Address already in use"
    record["one_native_comm"] = first.handle == second.handle
    torch.manual_seed(7)
    gen, disc = Net(), Net()
    g, d = gct.DistributedDataParallel(gen), gct.DistributedDataParallel(disc)  # comm=None
    record["wrappers_share_it"] = g.comm.handle == d.comm.handle == first.handle
    g_opt, d_opt = torch.optim.SGD(g.parameters(), lr=0.05), torch.optim.SGD(d.parameters(), lr=0.05)
    for step in range(3):
        for model, opt in ((g, g_opt), (d, d_opt)):
            opt.zero_grad()
            x, y = batch(step, rank, world)
            ((model(x) - y) ** 2).mean().backward()
            opt.step()
    g.close()
    first.close()
    d_opt.zero_grad()  # the other users go on
    x, y = batch(9, rank, world)
    ((d(x) - y) ** 2).mean().backward()
    d_opt.step()
    t = torch.full((4,), float(rank + 1))
    second.all_reduce(t, op="sum")
    record["after_first_closed"] = t.tolist()
    d.close()
    second.close()
    record["gen"], record["disc"] = params_of(gen), params_of(disc)
    sums = []
    for cycle in range(20):
        if (cycle + rank) % 3 == 0:
            time.sleep(0.02 * (rank + 1))  # out of step: one rank still closing while another makes the next
        c = gradcomm.init_from_env(timeout=60)
        t = torch.full((2,), float(cycle * 10 + rank))
        c.all_reduce(t, op="sum")
        sums.append(t[0].item())
        c.close()
    record["cycles"] = sums


def run_threads_share_default(args, rank, world, record):
    """Four threads of each rank all-reduce their own constant through the one
    default communicator at once (rank 1 two seconds later: rank 0's first call
    is still waiting inside when its other threads call). Every call must either
    raise or return 2x its constant; record what each got."""
    import threading
    import time
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(args.gc_port))
    comm = gradcomm.init_from_env(timeout=20)
    if rank == 1:
        time.sleep(2.0)
    calls = [None] * 4
    start = threading.Barrier(4)

    def call(i):
        t = torch.full((1 << 16,), 10.0 * (i + 1))
        start.wait()
        try:
            comm.all_reduce(t, op="sum")
            calls[i] = {"ok": True, "error": "", "values": sorted(set(t.tolist()))}
        except gradcomm.Error as e:
            calls[i] = {"ok": False, "error": str(e), "values": []}

    threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    record["calls"] = calls
    comm.close()


def run_compile(args, rank, world, record):
    """The same 10 steps eagerly and under torch.compile: the wrapper compiled, a
    compiled module wrapped, the loss function compiled."""
    comm = gradcomm.init(rank, world, master_port=args.gc_port, timeout=120)
    for mode in ("eager", "compile_wrapper", "wrap_compiled", "compile_loss", "compiled_autograd"):
        torch._dynamo.config.compiled_autograd = mode == "compiled_autograd"  # the backward traced too
        torch.manual_seed(7)
        model = nn.Sequential(Net(), nn.BatchNorm1d(10))  # buffers: broadcast before every forward
        ddp = gct.DistributedDataParallel(torch.compile(model) if mode == "wrap_compiled" else model, comm,
                                          bucket_cap_mb=args.bucket_mb, first_bucket_mb=args.bucket_mb)
        run = torch.compile(ddp) if mode in ("compile_wrapper", "compiled_autograd") else ddp

        def loss_fn(out, y):
            return ((out - y) ** 2).mean()

        if mode == "compile_loss":
            loss_fn = torch.compile(loss_fn)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
        for step in range(10):
            opt.zero_grad()
            x, y = batch(step, rank, world)
            loss_fn(run(x), y).backward()
            opt.step()
        record[mode] = params_of(model)
        ddp.close()
    torch._dynamo.config.compiled_autograd = False
    comm.close()


def run_join(args, rank, world, record):
    """Uneven inputs (rank r has args.batches[r] batches) under torch DDP's join()
    and gradcomm's, then join(throw_on_early_termination=True)."""
    def loop(model, opt, steps):
        for step in range(steps):
            if step % args.accumulate == 0:
                opt.zero_grad()
            x, y = batch(step, rank, world)
            last = (step + 1) % args.accumulate == 0
            with contextlib.nullcontext() if last else model.no_sync():
                ((model(x) - y) ** 2).mean().backward()
            if last:
                opt.step()

    def make():  # with buffers (BatchNorm's running statistics): broadcast before every forward
        torch.manual_seed(7)
        return nn.Sequential(Net(), nn.BatchNorm1d(10))

    divide = not args.join_effective
    if args.accumulate == 1:  # torch's DDP join() shadows no no_sync steps
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.gloo_port}", rank=rank,
                                world_size=world)
        model = make()
        ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=args.bucket_mb)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
        with ddp.join(divide_by_initial_world_size=divide):
            loop(ddp, opt, args.batches[rank])
        record["ddp"] = params_of(model)
        dist.destroy_process_group()

    comm = gradcomm.init(rank, world, master_port=args.gc_port, timeout=60)
    model = make()
    gc = gct.DistributedDataParallel(model, comm, bucket_cap_mb=args.bucket_mb, first_bucket_mb=args.bucket_mb)
    opt = torch.optim.SGD(gc.parameters(), lr=0.05, momentum=0.9)
    with gc.join(divide_by_initial_world_size=divide):
        loop(gc, opt, args.batches[rank])
    record["gradcomm"] = params_of(model)
    try:
        with gc.join(throw_on_early_termination=True):
            loop(gc, opt, args.batches[rank])
        record["raised"] = None
    except gct.JoinedRankError as e:
        record["raised"] = str(e)
    gc.close()
    comm.close()


class PsNet(nn.Module):
    """Matrices only (no biases, distinct shapes): every tensor in the bucket is
    compressed, so powerSGD_hook's error feedback over the whole bucket and
    gradcomm's over the matrices are the same thing."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(32, 40, bias=False)
        self.b = nn.Linear(40, 24, bias=False)
        self.c = nn.Linear(24, 10, bias=False)

    def forward(self, x):
        return self.c(torch.tanh(self.b(torch.tanh(self.a(x)))))


def initial_qs(model, r):
    """The Q both sides start from: a seeded Gaussian per matrix (cols x r), by shape."""
    qs = {}
    for i, p in enumerate(model.parameters()):
        g = torch.Generator().manual_seed(100 + i)
        qs[tuple(p.shape)] = torch.randn(p.numel() // p.shape[0], r, generator=g)
    return qs


def orthogonalized(q):
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as ps
    q = q.clone().unsqueeze(0)
    ps._orthogonalize(q, 0)
    return q.squeeze(0)


def parse_powersgd_state(blob, r):
    """gradcomm's PowerSGD state (docs/powersgd.md): header (version 2: with the
    part, 0 for a whole state), then per matrix (grad, rows, cols, Q cols x r, E rows x cols)."""
    import struct
    head = 8 + 4 + 1 + 4 + 8 + 8 + 1
    magic, version, part, rank, step, count, ef = struct.unpack_from("<8sIBIQQB", blob, 0)
    assert magic.startswith(b"GCPSGD") and version == 2 and part == 0 and rank == r and ef == 1
    off, slots = head, []
    for _ in range(count):
        grad, rows, cols = struct.unpack_from("<QQQ", blob, off)
        off += 24
        q = torch.frombuffer(bytearray(blob[off:off + 4 * cols * r]), dtype=torch.float32).view(cols, r)
        off += 4 * cols * r
        e = blob[off:off + 4 * rows * cols]
        off += 4 * rows * cols
        slots.append([grad, rows, cols, q, e])
    return blob[:head], slots


def build_powersgd_state(header, slots):
    import struct
    out = bytearray(header)
    for grad, rows, cols, q, e in slots:
        out += struct.pack("<QQQ", grad, rows, cols) + q.contiguous().numpy().tobytes() + e
    return bytes(out)


def run_powersgd_parity(args, rank, world, record):
    """The same initial Q fed to powerSGD_hook (its q_memory_dict, which it then
    orthogonalizes every step) and to gradcomm (its state, orthogonalized the
    same way before every compressed step): the averaged gradients must agree."""
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as ps
    r, start, steps = args.powersgd_rank, args.powersgd_start, args.steps
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.gloo_port}", rank=rank, world_size=world)
    torch.manual_seed(7)
    model = PsNet()
    init = initial_qs(model, r)
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=25)
    state = ps.PowerSGDState(process_group=None, matrix_approximation_rank=r, start_powerSGD_iter=start,
                             min_compression_rate=0.5, use_error_feedback=True, warm_start=True,
                             orthogonalization_epsilon=0, batch_tensors_with_same_shape=False)

    def hook(state, bucket):
        # The hook draws its own Q when the bucket has no P memory yet; given both,
        # it uses (and orthogonalizes) the Q it finds.
        if state.iter >= state.start_powerSGD_iter and bucket.index() not in state.p_memory_dict:
            grads = bucket.gradients()
            state.p_memory_dict[bucket.index()] = torch.empty(sum(g.shape[0] * r for g in grads))
            state.q_memory_dict[bucket.index()] = torch.cat([init[tuple(g.shape)].reshape(-1) for g in grads])
        return ps.powerSGD_hook(state, bucket)

    ddp.register_comm_hook(state, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    ddp_grads = []
    for step in range(steps):
        opt.zero_grad()
        x, y = batch(step, rank, world)
        ((ddp(x) - y) ** 2).mean().backward()
        ddp_grads.append([p.grad.reshape(-1).tolist() for p in model.parameters()])
        opt.step()
    dist.destroy_process_group()

    comm = gradcomm.init(rank, world, master_port=args.gc_port, timeout=60)
    torch.manual_seed(7)
    model = PsNet()
    gc = gct.DistributedDataParallel(model, comm, bucket_cap_mb=25, compression=dict(
        kind="powersgd", rank=r, start_iter=start, min_compression_rate=0.5, orthogonalization_eps=0.0))
    opt = torch.optim.SGD(gc.parameters(), lr=0.05)
    shapes = [tuple(p.shape) for p in model.parameters()]
    gc_grads = []
    for step in range(steps):
        opt.zero_grad()
        if step >= start:  # what the hook does to Q at the start of a compressed step
            header, slots = parse_powersgd_state(gc.comm_state_dict()["compression"]["state"], r)
            for slot in slots:
                q = init[shapes[slot[0]]] if step == start else slot[3]
                slot[3] = orthogonalized(q)
            gc.load_comm_state_dict({"compression": {"kind": "powersgd", "state": build_powersgd_state(header, slots)},
                                     "synced_steps": step})
        x, y = batch(step, rank, world)
        ((gc(x) - y) ** 2).mean().backward()
        gc_grads.append([p.grad.reshape(-1).tolist() for p in model.parameters()])
        opt.step()
    record["compressed_steps"] = gc.reducer.compression_stats()["compressed_steps"]
    record["ddp_grads"], record["gradcomm_grads"] = ddp_grads, gc_grads
    gc.close()
    comm.close()


def run_divergence(args, rank, world, result):
    """The divergence check across processes: the last rank builds its model from
    another seed and skips the wrapper's broadcast (a rank that never synced), then
    the ranks train in sync and one bit of one parameter flips on rank 1. Each
    check's report, as every rank saw it, goes into the result."""
    comm = gradcomm.init(rank, world, master_port=args.gc_port, timeout=60)
    result["transport"] = str(comm.transport).split(".")[-1]
    torch.manual_seed(1 if rank == world - 1 else 0)
    net = Net()
    named = dict(net.named_parameters())
    model = gct.DistributedDataParallel(net, comm)
    if rank == world - 1:  # undo the broadcast: this rank's own seed again
        torch.manual_seed(1)
        with torch.no_grad():
            for name, p in Net().named_parameters():
                named[name].copy_(p)
    reports = {"unsynced": model.check_divergence()}
    with torch.no_grad():  # everyone back on rank 0's parameters
        for p in net.parameters():
            comm.broadcast(p.data, root=0)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    for step in range(3):
        opt.zero_grad()
        x, y = batch(step, rank, world)
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
    reports["trained"] = model.check_divergence()
    if rank == 1:
        bits = named["fc1.weight"].data.view(torch.int32)
        bits[3, 5] ^= 1  # the lowest mantissa bit of one weight
    reports["flipped"] = model.check_divergence()
    result["reports"] = {k: {"ranks": {str(r): n for r, n in v.ranks.items()}, "mismatched": v.mismatched}
                         for k, v in reports.items()}
    model.close()
    comm.close()


def run_stragglers(args, rank, world, result):
    """Straggler attribution across processes: three wrappers in turn, each 9
    synced steps, with one rank 60 ms late in its backward (a gradient hook), in
    loading its batch (before forward), or in its optimizer step (a pre-step
    hook), then none late. Each wrapper's last report goes into the result."""
    comm = gradcomm.init(rank, world, master_port=args.gc_port, timeout=60)
    result["transport"] = str(comm.transport).split(".")[-1]
    nap = lambda: time.sleep(0.06)  # noqa: E731
    reports = {}
    for late_rank, phase in ((2, "compute"), (1, "data"), (0, "optimizer"), (-1, None)):
        torch.manual_seed(0)
        net = Net()
        model = gct.DistributedDataParallel(net, comm)
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        hooks = []
        if rank == late_rank and phase == "compute":
            hooks.append(net.fc1.weight.register_hook(lambda g: (nap(), g)[1]))
        if rank == late_rank and phase == "optimizer":
            hooks.append(opt.register_step_pre_hook(lambda *a: nap()))
        for step in range(9):
            opt.zero_grad()
            x, y = batch(step, rank, world)
            if rank == late_rank and phase == "data":
                nap()
            ((model(x) - y) ** 2).mean().backward()
            opt.step()
        for h in hooks:
            h.remove()
        r = model.straggler_report()
        reports[phase or "none"] = {"windows": r.windows, "late_rank": r.late_rank, "phase": r.phase,
                                    "late_steps": r.late_steps, "late_ms": r.late_ms,
                                    "line": gradcomm.reducer.straggler_line(r)}
        model.close()
    result["reports"] = reports
    # Rank 1's fc1.weight gradient turns NaN from step 6 on: every rank's reduced
    # gradients are NaN, and every rank names rank 1 and that parameter.
    torch.manual_seed(0)
    net = Net()
    model = gct.DistributedDataParallel(net, comm)
    opt = torch.optim.SGD(net.parameters(), lr=0.0)
    if rank == 1:
        state = {"step": 0}
        net.fc1.weight.register_hook(lambda g: g.fill_(float("nan")) if state["step"] >= 6 else g)
    for step in range(1, 10):
        if rank == 1:
            state["step"] = step
        opt.zero_grad()
        x, y = batch(step, rank, world)
        ((model(x) - y) ** 2).mean().backward()
    result["nonfinite_source"] = model.nonfinite_source()
    model.close()
    comm.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--gloo-port", type=int, required=True)
    ap.add_argument("--gc-port", type=int, required=True)
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--scenario", default="parity",
                    choices=["parity", "unused_error", "powersgd_parity", "shared_default", "compile", "join",
                             "threads_share_default", "divergence", "stragglers"])
    ap.add_argument("--opt", default="sgd", choices=["sgd", "sgd_momentum", "adam"])
    ap.add_argument("--zero-grad", default="none", choices=["none", "zero", "assign", "mixed"])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--accumulate", type=int, default=1)
    ap.add_argument("--bucket-mb", type=float, default=0.004)  # a few KiB: several buckets
    ap.add_argument("--bucket-view", action="store_true")
    ap.add_argument("--branch", action="store_true")
    ap.add_argument("--wire", default="f32", choices=["f32", "f16"])
    ap.add_argument("--amp", action="store_true")
    ap.add_argument("--inject", type=int, nargs="*", default=[])
    ap.add_argument("--powersgd", action="store_true")
    ap.add_argument("--powersgd-rank", type=int, default=2)
    ap.add_argument("--powersgd-start", type=int, default=3)
    ap.add_argument("--record-grads", action="store_true")
    ap.add_argument("--checkpoint-at", type=int, default=0)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--skip-ddp", action="store_true")
    ap.add_argument("--batches", type=int, nargs="*", default=[])  # join: each rank's number of batches
    ap.add_argument("--join-effective", action="store_true")  # join: divide by the ranks that had inputs
    ap.add_argument("--device", default="cpu")  # gradcomm's side; torch's DDP stays on the CPU (gloo)
    args = ap.parse_args()
    rank, world = args.rank, args.world
    torch.set_num_threads(1)
    result = {"rank": rank}
    if args.scenario == "unused_error":
        run_unused_error(args, rank, world, result)
    elif args.scenario == "powersgd_parity":
        run_powersgd_parity(args, rank, world, result)
    elif args.scenario == "shared_default":
        run_shared_default(args, rank, world, result)
    elif args.scenario == "compile":
        run_compile(args, rank, world, result)
    elif args.scenario == "join":
        run_join(args, rank, world, result)
    elif args.scenario == "threads_share_default":
        run_threads_share_default(args, rank, world, result)
    elif args.scenario == "divergence":
        run_divergence(args, rank, world, result)
    elif args.scenario == "stragglers":
        run_stragglers(args, rank, world, result)
    else:
        if not args.skip_ddp:
            dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.gloo_port}", rank=rank,
                                    world_size=world)
            ddp_record = {} if args.record_grads or args.amp else None
            result["ddp"] = run_ddp(args, rank, world, ddp_record)
            result["ddp_record"] = ddp_record
            dist.destroy_process_group()
        gc_record = {}
        result["gradcomm"] = run_gradcomm(args, rank, world, gc_record)
        result["gradcomm_record"] = gc_record
    with open(os.path.join(args.outdir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f, allow_nan=True)


if __name__ == "__main__":
    sys.exit(main())
