"""gradcomm's reducer inside a PyTorch training loop, through ctypes: what a
framework does when it embeds gradcomm instead of DDP's reducer.

Each process is one rank (the torchrun variables: RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT). The gradients are registered once, by address, so they
must never move: they are allocated before the first backward and zeroed in place.
A post-accumulate-grad hook marks each gradient ready as autograd produces it,
so buckets are all-reduced while backward is still running; finalize leaves them
averaged over the ranks. Every rank trains on its shard of each batch; the
parameters must then equal those of one process training on the whole batch
(the program exits 1 otherwise).

    python3 examples/torch_reducer.py --ranks 2          # spawns 2 processes on this host
    torchrun --nproc-per-node 2 examples/torch_reducer.py   # or under a launcher

On the host the ranks talk over TCP (the socket transport); with --gpu each rank
uses the GPU of its local rank and NCCL. Exits 77 (skipped) without PyTorch or,
with --gpu, without a GPU. GRADCOMM_LIB names the library (default: libgradcomm.so
in build/ next to this file's folder, then the loader's search path).
"""
import argparse
import ctypes
import os
import socket
import subprocess
import sys

# ---- the C API, as ctypes declarations (include/gradcomm/*.h) -------------------

C_HOST, C_CUDA = 0, 1
F32 = 0
WIRE_SAME_AS_GRAD = -1
CONFIG_MAGIC = 0x67636F6D  # "gcom"


class Device(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("ordinal", ctypes.c_int)]


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("count", ctypes.c_size_t), ("dtype", ctypes.c_int)]


class CommConfig(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("magic", ctypes.c_uint32), ("version", ctypes.c_uint32),
                ("rank", ctypes.c_int), ("world_size", ctypes.c_int), ("local_rank", ctypes.c_int),
                ("master_port", ctypes.c_int), ("master_addr", ctypes.c_char_p), ("job_key", ctypes.c_char_p),
                ("device", Device), ("timeout_s", ctypes.c_double), ("transport", ctypes.c_int),
                ("reserved_v1", ctypes.c_int32)]


class ReducerConfig(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("magic", ctypes.c_uint32), ("version", ctypes.c_uint32),
                ("bucket_cap_bytes", ctypes.c_size_t), ("first_bucket_bytes", ctypes.c_size_t),
                ("wire_dtype", ctypes.c_int), ("grad_as_bucket_view", ctypes.c_int), ("average", ctypes.c_int),
                ("unused_grads", ctypes.c_int), ("rebuild_buckets", ctypes.c_int), ("reserved_v1", ctypes.c_int),
                ("scaler", ctypes.c_void_p)]


def load_gradcomm():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.environ.get("GRADCOMM_LIB") or os.path.join(here, "..", "build", "libgradcomm.so")
    lib = ctypes.CDLL(path if os.path.exists(path) else "libgradcomm.so")
    lib.gcommGetLastError.restype = ctypes.c_char_p
    lib.gcommGetStatusName.restype = ctypes.c_char_p
    return lib


class Gradcomm:
    """Each call checked: a failure raises with gradcomm's message."""

    def __init__(self, lib):
        self.lib = lib
        version = ctypes.c_int()
        self.check(lib.gcommGetVersion(ctypes.byref(version)), "gcommGetVersion")
        self.version = version.value

    def check(self, status, what):
        if status != 0:
            name = self.lib.gcommGetStatusName(status).decode()
            raise RuntimeError(f"{what}: {name}: {self.lib.gcommGetLastError().decode()}")

    def header(self, config):
        # What GCOMM_*_CONFIG_INITIALIZER puts first: the struct's size, the magic, the version.
        config.size, config.magic, config.version = ctypes.sizeof(config), CONFIG_MAGIC, self.version
        return config

    def comm_from_env(self, device):
        c = self.header(CommConfig())
        c.rank = c.world_size = c.local_rank = c.master_port = -1  # unset: from the environment
        c.device = device
        comm = ctypes.c_void_p()
        self.check(self.lib.gcommCommInitFromEnv(ctypes.byref(c), ctypes.byref(comm)), "gcommCommInitFromEnv")
        return comm

    def reducer(self, comm, tensors, bucket_cap_bytes):
        r = self.header(ReducerConfig())
        r.bucket_cap_bytes = bucket_cap_bytes
        r.first_bucket_bytes = min(bucket_cap_bytes, 1 << 20)
        r.wire_dtype = WIRE_SAME_AS_GRAD
        r.average = 1
        r.rebuild_buckets = 1
        arr = (Tensor * len(tensors))(*tensors)
        red = ctypes.c_void_p()
        self.check(self.lib.gcommReducerCreate(comm, arr, ctypes.c_size_t(len(tensors)), ctypes.byref(r),
                                               ctypes.byref(red)), "gcommReducerCreate")
        return red


# ---- the training program -------------------------------------------------------


def make_model(torch):
    torch.manual_seed(0)  # the same initial weights on every rank
    return torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                               torch.nn.ReLU(), torch.nn.Linear(256, 8))


def batch(torch, step, device):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(64, 32, generator=g)
    y = torch.randn(64, 8, generator=g)
    return x.to(device), y.to(device)


def train_reference(torch, steps, device):
    """One process, the whole batch: what the ranks together must reproduce."""
    model = make_model(torch).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(steps):
        x, y = batch(torch, step, device)
        opt.zero_grad(set_to_none=False)
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return [p.detach().cpu() for p in model.parameters()]


def rank_main(args):
    import torch

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    device = torch.device(f"cuda:{local_rank}") if args.gpu else torch.device("cpu")
    gc = Gradcomm(load_gradcomm())
    lib = gc.lib
    comm = gc.comm_from_env(Device(C_CUDA, local_rank) if args.gpu else Device(C_HOST, -1))

    model = make_model(torch).to(device)
    params = list(model.parameters())
    # Gradients exist before the first backward and never move: autograd accumulates
    # into them in place, and the reducer holds their addresses.
    for p in params:
        p.grad = torch.zeros_like(p)
    tensors = [Tensor(p.grad.data_ptr(), p.grad.numel(), F32) for p in params]
    reducer = gc.reducer(comm, tensors, bucket_cap_bytes=64 << 10)
    # On the GPU every gradcomm call takes the stream autograd wrote the gradient on.
    stream = (lambda: ctypes.c_void_p(torch.cuda.current_stream(device).cuda_stream)) if args.gpu else (
        lambda: ctypes.c_void_p(0))
    for i, p in enumerate(params):
        p.register_post_accumulate_grad_hook(
            lambda _, i=i: gc.check(lib.gcommReducerMarkReady(reducer, ctypes.c_size_t(i), stream()),
                                    f"gcommReducerMarkReady({i})"))

    opt = torch.optim.SGD(params, lr=0.05)
    share = 64 // world
    for step in range(args.steps):
        x, y = batch(torch, step, device)
        x, y = x[rank * share:(rank + 1) * share], y[rank * share:(rank + 1) * share]
        opt.zero_grad(set_to_none=False)  # in place: the addresses stay
        gc.check(lib.gcommReducerBeginStep(reducer, 1), "gcommReducerBeginStep")
        torch.nn.functional.mse_loss(model(x), y).backward()  # the hooks mark gradients ready
        gc.check(lib.gcommReducerFinalize(reducer, stream(), None), "gcommReducerFinalize")
        opt.step()  # the averaged gradients: the whole batch's mean-loss gradient

    if args.gpu:
        torch.cuda.synchronize(device)
    gc.check(lib.gcommReducerDestroy(reducer), "gcommReducerDestroy")
    gc.check(lib.gcommCommDestroy(comm), "gcommCommDestroy")
    want = train_reference(torch, args.steps, device)
    worst = max(((p.detach().cpu() - w).abs().max() / (w.abs().max() + 1e-12)).item() for p, w in zip(params, want))
    ok = worst < 1e-4
    if rank == 0:
        print(f"{world} ranks ({'NCCL' if args.gpu else 'sockets'}), {args.steps} steps, "
              f"{sum(p.numel() for p in params)} parameters in {len(params)} gradients")
    print(f"rank {rank}: largest relative difference from one process on the whole batch: {worst:.2e} "
          f"({'ok' if ok else 'FAIL'})")
    return 0 if ok else 1


def spawn(args):
    """Runs this file as `args.ranks` processes with torchrun's variables."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(args.ranks):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(args.ranks), LOCAL_RANK=str(r),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GRADCOMM_TIMEOUT_S="60")
        cmd = [sys.executable, os.path.abspath(__file__), "--steps", str(args.steps)] + (["--gpu"] if args.gpu else [])
        procs.append(subprocess.Popen(cmd, env=env))
    codes = [p.wait(timeout=300) for p in procs]
    for r, c in enumerate(codes):
        if c != 0:
            print(f"rank {r} exited {c}")
    return 0 if all(c == 0 for c in codes) else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=2, help="processes to spawn when not under a launcher")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--gpu", action="store_true", help="one GPU per rank, NCCL")
    args = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"skipped: PyTorch is not installed for {sys.executable} ({e})")
        return 77
    if args.gpu and torch.cuda.device_count() < (int(os.environ.get("WORLD_SIZE", args.ranks))):
        print(f"skipped: --gpu needs one GPU per rank; {torch.cuda.device_count()} visible")
        return 77
    if 64 % int(os.environ.get("WORLD_SIZE", args.ranks)) != 0:
        print("the number of ranks must divide the batch of 64")
        return 2
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return rank_main(args)
    return spawn(args)


if __name__ == "__main__":
    sys.exit(main())
