"""Communicators: one rank of a multi-process job (torchrun, mpirun, srun), or N
ranks as threads of this process (the local transport)."""
import contextlib
import ctypes
import functools
import os
import re
import threading

from . import _gradcomm as _C
from ._buffers import describe, device_name, parse_device, same_device, torch_device
from ._handle import Handle
from .errors import InvalidArgumentError, InvalidStateError

_OPS = {"sum": _C.RedOp.Sum, "avg": _C.RedOp.Avg, "max": _C.RedOp.Max, "min": _C.RedOp.Min}


def _config(device=None, rank=None, world_size=None, local_rank=None, master_addr=None, master_port=None,
            timeout=None, job_key=None, transport=None):
    c = _C.CommConfig()
    if device is not None:
        c.device = parse_device(device)
    if rank is not None:
        c.rank = rank
    if world_size is not None:
        c.world_size = world_size
    if local_rank is not None:
        c.local_rank = local_rank
    if master_addr is not None:
        c.master_addr = master_addr
    if master_port is not None:
        c.master_port = master_port
    if timeout is not None:
        c.timeout_s = float(timeout)
    if job_key is not None:
        c.job_key = job_key
    if transport is not None:
        c.transport = _transport(transport)
    return c


# The transports by the names the C library gives them ("cuda-ipc" for CudaIpc), as
# GRADCOMM_TRANSPORT takes them.
_TRANSPORTS = {re.sub(r"(?<!^)(?=[A-Z])", "-", m.name).lower(): m for m in _C.Transport}


def _transport(transport):
    if isinstance(transport, _C.Transport):
        return transport
    if transport not in _TRANSPORTS:
        raise InvalidArgumentError("gcommInvalidArgument", f"transport {transport!r} is not one of "
                                   f"{', '.join(_TRANSPORTS)}")
    return _TRANSPORTS[transport]


class Communicator(Handle):
    """One rank. Collectives take torch tensors or numpy arrays on its device;
    on a CUDA communicator they are enqueued on ``stream`` (default: torch's
    current stream when torch is loaded, else the legacy default stream)."""

    _kind = "communicator"

    def __init__(self, handle, destroy=_C.comm_destroy):
        self._own(handle, destroy)
        self.rank = _C.comm_rank(handle)
        self.world_size = _C.comm_size(handle)
        self.device = _C.comm_device(handle)
        self.transport = _C.comm_transport(handle)

    def __repr__(self):
        state = "closed" if self.closed else str(self.transport).split(".")[-1].lower()
        return f"<gradcomm.Communicator rank {self.rank} of {self.world_size} on {device_name(self.device)}, {state}>"

    def _buf(self, x, what):
        ptr, count, dtype, dev = describe(x, what)
        if not same_device(dev, self.device):
            raise InvalidArgumentError("gcommInvalidArgument", f"{what} is on {device_name(dev)}, the communicator on "
                                       f"{device_name(self.device)}")
        if _group_depth() > 0:  # NCCL launches a group's collectives at its end: the buffers must live until then
            _groups.kept.append(x)
        return ptr, count, dtype

    def _stream(self, stream):
        if stream is not None:
            return int(stream)
        if self.device.kind == _C.DeviceKind.Cuda:
            from ._torch_streams import current_stream
            return current_stream(self.device.ordinal)
        return 0

    def all_reduce(self, tensor, op="avg", out=None, stream=None):
        """Reduces ``tensor`` over the ranks (in place, or into ``out``)."""
        src = self._buf(tensor, "tensor")
        dst = self._buf(out, "out") if out is not None else src
        if dst[1:] != src[1:]:
            raise InvalidArgumentError("gcommInvalidArgument", "out must match tensor's size and dtype")
        _C.all_reduce(self.handle, src[0], dst[0], src[1], src[2], _op(op), self._stream(stream))
        return out if out is not None else tensor

    def broadcast(self, tensor, root=0, stream=None):
        ptr, count, dtype = self._buf(tensor, "tensor")
        _C.broadcast(self.handle, ptr, ptr, count, dtype, root, self._stream(stream))
        return tensor

    def all_gather(self, tensor, out, stream=None):
        """``out`` (world_size x tensor's elements) receives every rank's tensor."""
        src, dst = self._buf(tensor, "tensor"), self._buf(out, "out")
        if dst[1] != src[1] * self.world_size or dst[2] != src[2]:
            raise InvalidArgumentError("gcommInvalidArgument", f"out must hold world_size ({self.world_size}) x "
                                       f"{src[1]} elements of the tensor's dtype, not {dst[1]}")
        _C.all_gather(self.handle, src[0], dst[0], src[1], src[2], self._stream(stream))
        return out

    def reduce_scatter(self, tensor, out, op="avg", stream=None):
        """``out`` receives the reduction of this rank's block of ``tensor``."""
        src, dst = self._buf(tensor, "tensor"), self._buf(out, "out")
        if src[1] != dst[1] * self.world_size or dst[2] != src[2]:
            raise InvalidArgumentError("gcommInvalidArgument", f"tensor must hold world_size ({self.world_size}) x "
                                       f"{dst[1]} elements of out's dtype, not {src[1]}")
        _C.reduce_scatter(self.handle, src[0], dst[0], dst[1], src[2], _op(op), self._stream(stream))
        return out

    def all_to_all(self, tensor, out, stream=None):
        """Block q of ``tensor`` (its elements split in world_size equal blocks) goes
        to rank q; block q of ``out`` (same size, another buffer) comes from rank q."""
        src, dst = self._buf(tensor, "tensor"), self._buf(out, "out")
        if src[1] % self.world_size or dst[1:] != src[1:]:
            raise InvalidArgumentError("gcommInvalidArgument", f"tensor and out must both hold world_size "
                                       f"({self.world_size}) equal blocks of one dtype: {src[1]} and {dst[1]} "
                                       "elements")
        _C.all_to_all(self.handle, src[0], dst[0], src[1] // self.world_size, src[2], self._stream(stream))
        return out

    def send(self, tensor, peer, stream=None):
        """Sends ``tensor`` to rank ``peer`` (its k-th send to ``peer`` meets the
        peer's k-th ``recv`` from this rank, of the same size and dtype). Outside
        ``gradcomm.group()`` it may wait for that receive: two ranks that send to
        each other first need a group."""
        ptr, count, dtype = self._buf(tensor, "tensor")
        ptr = _group_send_buffer(tensor, ptr)
        _C.send(self.handle, ptr, count, dtype, peer, self._stream(stream))

    def recv(self, tensor, peer, stream=None):
        """Receives into ``tensor`` what rank ``peer`` sends (see send)."""
        ptr, count, dtype = self._buf(tensor, "tensor")
        target, landing = _group_recv_landing(tensor, ptr)
        _C.recv(self.handle, target, count, dtype, peer, self._stream(stream))
        if _group_depth() > 0:  # only a receive the transport took is delivered at the end
            _groups.receives.append((tensor, ptr, count, landing))
        return tensor

    def barrier(self, stream=None):
        _C.barrier(self.handle, self._stream(stream))

    def synchronize(self):
        """Waits (up to the timeout) for every collective enqueued so far."""
        _C.comm_synchronize(self.handle)

    def check(self):
        """Raises the error that aborted the communicator, if any (never blocks)."""
        _C.comm_async_error(self.handle)

    def bytes_sent(self):
        """Payload bytes this rank sent (host transports of separate processes:
        socket, shm, mpi)."""
        return _C.comm_bytes_sent(self.handle)

    def flight_record(self):
        """This communicator's last collectives (the flight recorder) as a dict."""
        import json
        return json.loads(_C.comm_flight_record(self.handle))

    def dump_flight_record(self, path=None):
        """Writes the flight record as JSON to ``path`` (None: the path
        GRADCOMM_FLIGHT_RECORDER_FILE names, %r the rank); tools/gradcomm_desync.py
        reads the ranks' files."""
        _C.comm_dump_flight_record(self.handle, None if path is None else str(path))

    def abort(self):
        """Fails outstanding and later operations; close() is still needed."""
        _C.comm_abort(self.handle)

    def check_divergence(self, tensors, names=None, stream=None):
        """The divergence check: do the ranks hold the same bytes in ``tensors``
        (torch tensors of any dtype, or numpy arrays, on this communicator's
        device)? Collective: every rank passes the same number of tensors, of the
        same sizes, in the same order. Each rank hashes each tensor (XXH64 of 64 KiB
        chunks; a kernel on a GPU, on ``stream``) and the hashes are compared on
        every rank alike. Returns a Divergence, the same on every rank; a
        disagreement is a result, not an error. Blocks until done."""
        tensors = list(tensors)
        names = [str(i) for i in range(len(tensors))] if names is None else [str(n) for n in names]
        if len(names) != len(tensors):
            raise InvalidArgumentError("gcommInvalidArgument", f"{len(names)} names for {len(tensors)} tensors")
        spans = [self._span(t, f"tensors[{i}]") for i, t in enumerate(tensors)]
        first, mismatched = _C.check_divergence(self.handle, [p for p, _ in spans], [n for _, n in spans],
                                                self._stream(stream))
        return Divergence(names, first, mismatched)

    def _span(self, x, what):
        """(address, bytes) of a dense tensor or array of any dtype on this device."""
        if hasattr(x, "data_ptr") and hasattr(x, "element_size"):  # torch.Tensor
            if x.is_sparse:
                raise InvalidArgumentError("gcommInvalidArgument", f"{what} is a sparse tensor: gradcomm takes dense "
                                           "tensors")
            dev, address, size = torch_device(x, what), x.data_ptr(), x.numel() * x.element_size()
        elif hasattr(x, "__array_interface__"):  # numpy
            if not x.flags["C_CONTIGUOUS"]:
                raise InvalidArgumentError("gcommInvalidArgument", f"{what} is not C-contiguous")
            dev, address, size = _C.Device(), x.__array_interface__["data"][0], x.nbytes
        else:
            raise InvalidArgumentError("gcommInvalidArgument", f"{what} must be a torch.Tensor or a numpy array, not "
                                       f"{type(x).__name__}")
        if not same_device(dev, self.device):
            raise InvalidArgumentError("gcommInvalidArgument", f"{what} is on {device_name(dev)}, the communicator on "
                                       f"{device_name(self.device)}")
        return address, size


class Divergence:
    """The divergence check's report (Communicator.check_divergence), the same on
    every rank. ``first_mismatch[r]``: the index of rank r's first tensor whose
    bytes differ from the majority's (-1: none); a tensor's majority is the hash
    most ranks hold, and among groups equally large the one holding the lowest rank
    (two ranks that disagree: rank 1 is named). ``ranks``: {rank: name of that
    tensor} for the ranks off the majority; ``mismatched``: how many tensors some
    rank disagrees on."""

    def __init__(self, names, first_mismatch, mismatched):
        self.names = tuple(names)
        self.first_mismatch = tuple(first_mismatch)
        self.mismatched = mismatched

    @property
    def agreed(self):
        return self.mismatched == 0

    @property
    def ranks(self):
        return {r: self.names[i] for r, i in enumerate(self.first_mismatch) if i >= 0}

    def __str__(self):
        if self.agreed:
            return f"the {len(self.first_mismatch)} ranks agree on all {len(self.names)} tensors"
        who = ", ".join(f"rank {r} (first at {n!r})" for r, n in self.ranks.items())
        verb = "disagrees" if len(self.ranks) == 1 else "disagree"
        return (f"{self.mismatched} of {len(self.names)} tensors differ between the {len(self.first_mismatch)} ranks: "
                f"{who} {verb} with the majority")

    def __repr__(self):
        return f"<gradcomm.Divergence: {self}>"


def _op(op):
    if isinstance(op, _C.RedOp):
        return op
    if op not in _OPS:
        raise InvalidArgumentError("gcommInvalidArgument", f"op {op!r}: expected one of {sorted(_OPS)}")
    return _OPS[op]


# This process's default communicators (init_from_env), one per device and
# rendezvous: shared by every caller, as every DDP model of a process shares
# torch's default process group, and destroyed (a collective: every rank's last
# user closes it) when the last one is closed. Each entry is found under the key it
# was asked for and under its resolved device ("cuda" and "cuda:1" alike).
# _defaults_lock guards the dict only (re-entrant: a collected Communicator's
# finalizer may release one while it is held); a key's own lock is held while its
# communicator is made, so ranks that are threads of this process, with other keys,
# meet each other meanwhile.
_defaults = {}  # key -> {"handle", "users", "keys", "environment"}
_defaults_lock = threading.RLock()
_making = {}  # key -> lock held while that key's communicator is made


def _default_key(device, kwargs, resolved=None):
    if resolved is not None:
        name = device_name(resolved)
    else:
        try:
            dev = parse_device(device)
            name = device_name(dev) if dev.kind == _C.DeviceKind.Host or dev.ordinal >= 0 else str(device)
        except Exception:  # noqa: BLE001 - an invalid device is refused by the init below, with its reason
            name = str(device)
    # The timeout is a setting, not an identity: the first caller's holds.
    return name, tuple(sorted((k, str(v)) for k, v in kwargs.items() if v is not None and k != "timeout"))


# What init_from_env reads from the environment to find the rank, the world and
# the rendezvous: a default made from one set of values is not the answer for another.
_LAUNCH_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "GRADCOMM_MASTER_PORT",
                     "GRADCOMM_JOB_KEY", "GRADCOMM_TRANSPORT", "GRADCOMM_BOOTSTRAP", "TORCHELASTIC_RUN_ID",
                     "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_JOB_ID",
                     "SLURM_STEP_ID")


def _launch_environment():
    return {k: os.environ.get(k) for k in _LAUNCH_VARIABLES}


def _check_environment(entry):
    """Refuses a default made for another launch environment (issue 44 #12: after
    WORLD_SIZE and MASTER_PORT changed, the old world's communicator was returned)."""
    now = _launch_environment()
    changed = [f"{k}: {entry['environment'][k]!r} -> {now[k]!r}" for k in _LAUNCH_VARIABLES
               if now[k] != entry["environment"][k]]
    if changed:
        raise InvalidStateError("gcommInvalidState", "the launcher's environment changed since this process's "
                                f"default communicator was made ({'; '.join(changed)}), and it still serves the "
                                "old one: close its users (wrappers made with comm=None, init_from_env's "
                                "communicators) first, then init_from_env() makes one for the environment as it "
                                "is; or pass explicit values to gradcomm.init")


def _release_default(entry, handle):
    with _defaults_lock:
        entry["users"] -= 1
        if entry["users"] > 0:
            return
        for key in entry["keys"]:
            if _defaults.get(key) is entry:
                del _defaults[key]
    _C.comm_destroy(handle)


def _shared(entry):
    """A new user of `entry` (under _defaults_lock); refuses a default that failed."""
    try:
        _C.comm_async_error(entry["handle"])
    except Exception as e:  # noqa: BLE001 - re-raised with what to do
        raise InvalidStateError("gcommInvalidState", f"this process's default communicator failed ({e}): close "
                                "its users (wrappers made with comm=None, init_from_env's communicators); the next "
                                "init_from_env() then makes a new one") from None
    entry["users"] += 1
    return Communicator(entry["handle"], functools.partial(_release_default, entry))


def init_from_env(device="cpu", **kwargs):
    """This process's rank of a job started by torchrun, mpirun or srun (rank,
    world size and rendezvous from the launcher's environment; keyword arguments
    rank, world_size, local_rank, master_addr, master_port, timeout, job_key win
    over it). device: "cpu" (the shm transport when every rank is on one host,
    else socket; GRADCOMM_TRANSPORT names one) or "cuda"/"cuda:N" (NCCL with a GPU
    per rank, cuda-ipc when every rank's process is on one GPU).

    The process's default communicator for that device: every call (and every
    DistributedDataParallel made with comm=None) gets the same one, reference
    counted; close() releases this caller's use and the last close destroys it.
    The first call's timeout holds for all. While the default has failed a new
    call raises InvalidStateError; once its last user closed it, the next call
    makes a new one. A call after the launcher's variables changed (WORLD_SIZE,
    MASTER_PORT, ...) while the default is open raises InvalidStateError naming
    them. The default is one thread's at a time, as every communicator: a call
    while another thread is inside one fails it on every rank (docs/pytorch.md)."""
    key = _default_key(device, kwargs)

    def existing():
        if key in _defaults:
            return _defaults[key]
        if key[0] == "cuda":  # the local rank's GPU: the process's CUDA default, if it has one
            made = {id(e): e for k, e in _defaults.items() if k[0].startswith("cuda:") and k[1] == key[1]}
            if len(made) == 1:
                return next(iter(made.values()))
        return None

    with _defaults_lock:
        if existing() is not None:
            _check_environment(existing())
            return _shared(existing())
        making = _making.setdefault(key, threading.Lock())
    with making:  # one maker per key; a second caller waits, then shares
        with _defaults_lock:
            if existing() is not None:
                _check_environment(existing())
                return _shared(existing())
        environment = _launch_environment()
        handle = _C.comm_init_from_env(_config(device=device, **kwargs))
        with _defaults_lock:
            entry = {"handle": handle, "users": 0, "keys": {key, _default_key(device, kwargs, _C.comm_device(handle))},
                     "environment": environment}
            for k in entry["keys"]:
                _defaults.setdefault(k, entry)
            return _shared(entry)


def init(rank, world_size, master_addr="127.0.0.1", master_port=None, device="cpu", **kwargs):
    """One rank from explicit values only (the environment is not read).
    master_port: rank 0's store; None means 29500, or any free port for a world
    of one (whose store no other rank joins: a torch.distributed store or an
    earlier job on 29500 must not make it fail)."""
    if master_port is None:
        master_port = 0 if world_size == 1 else 29500
    return Communicator(_C.comm_init(_config(device=device, rank=rank, world_size=world_size,
                                             master_addr=master_addr, master_port=master_port, **kwargs)))


def init_local(nranks, device="cpu", timeout=None):
    """``nranks`` communicators whose ranks are threads of this process (local
    transport); drive each from its own thread."""
    handles = _C.comm_init_local(nranks, parse_device(device), _config(timeout=timeout))
    return [Communicator(h) for h in handles]


def launcher_rank():
    """(rank, world_size) a launcher set for this process; (-1, 0) if none."""
    return _C.launcher_rank()


# This thread's open groups. The host transports (and NCCL's launch) read and
# write a group's buffers when the outermost group ends, not at send()/recv():
# `c.send(torch.ones(4), 1)` would hand over memory freed before then, and a
# tensor resized (resize_) or re-pointed (set_) inside the block would have its
# old, freed memory written. So on the host a send carries a copy made at send(),
# and a receive lands in a buffer of the group's, copied into the tensor at the
# end only if the tensor still has the memory it had at recv(); otherwise the
# group's end raises, naming it, and the tensor is not written. GPU tensors are
# kept alive (their memory stays PyTorch's until the end) and checked the same
# way, but the transport has written the old memory by then: do not change them.
_groups = threading.local()


def _group_depth():
    return getattr(_groups, "depth", 0)


def _on_host(x):
    return not (hasattr(x, "is_cuda") and x.is_cuda)


def _copy_of(x, empty):
    if hasattr(x, "data_ptr"):  # torch
        return x.detach().new_empty(x.shape) if empty else x.detach().clone()
    import numpy as np
    return np.empty_like(x) if empty else x.copy()


def _group_send_buffer(tensor, ptr):
    """The address a send inside a group hands the transport."""
    if _group_depth() == 0:
        return ptr
    if not _on_host(tensor):  # kept alive by _buf
        return ptr
    copy = _copy_of(tensor, empty=False)
    _groups.kept.append(copy)
    return describe(copy)[0]


def _group_recv_landing(tensor, ptr):
    """(the address a receive hands the transport, the group's landing buffer or None)."""
    if _group_depth() == 0 or not _on_host(tensor):  # a GPU tensor: kept alive by _buf
        return ptr, None
    landing = _copy_of(tensor, empty=True)
    return describe(landing)[0], landing


def _nbytes(x):
    return x.numel() * x.element_size() if hasattr(x, "element_size") else x.nbytes


def _deliver_receives(receives):
    """After the group's end: each receive's bytes into its tensor (raw memory, as the
    transport writes outside a group: no autograd record, a parameter included), or
    an error naming the tensors that were changed inside the block; every other
    receive is still delivered."""
    changed = []
    for k, (tensor, ptr, count, landing) in enumerate(receives):
        try:
            now = describe(tensor)
        except InvalidArgumentError as e:  # its dtype or layout changed
            now = (None, None, str(e))
        if now[0] != ptr or now[1] != count:
            changed.append(f"receive {k} (given {count} elements at {ptr:#x}, now "
                           f"{'a tensor gradcomm cannot take' if now[0] is None else f'{now[1]} at {now[0]:#x}'})")
        elif landing is not None:
            ctypes.memmove(ptr, describe(landing)[0], _nbytes(landing))
    if changed:
        where = ("its old memory was written" if any(r[3] is None for r in receives)
                 else "the data received was not written")
        raise InvalidStateError("gcommInvalidState", "a tensor given to recv() was changed inside gradcomm.group() "
                                f"(resize_, set_ or a reassigned buffer): {'; '.join(changed)}; {where}. Keep a "
                                "tensor's memory as it is until the group ends")


@contextlib.contextmanager
def group():
    """gcommGroupStart/End around the block, on this thread: its sends and
    receives progress together (a ring of send-right, receive-left completes),
    and NCCL launches its collectives together. The host transports run its
    sends and receives when the block ends: on the host a send carries the
    tensor's values at send(), and a receive is written into its tensor at the
    end unless the block changed that tensor's memory (resize_, set_), which the
    end refuses with InvalidStateError. When the group's end fails (a send without
    its receive), its receives are not written. An error inside the block still
    ends the group, and wins."""
    if _group_depth() == 0:
        _groups.kept, _groups.receives = [], []
    _C.group_start()
    _groups.depth = getattr(_groups, "depth", 0) + 1
    try:
        yield
    except BaseException:
        try:
            _end_group()
        except Exception:  # the block's own error is the one to see
            pass
        raise
    _end_group()


def _end_group():
    receives = None
    try:
        _C.group_end()
        if _groups.depth == 1:
            receives = _groups.receives
    finally:
        _groups.depth -= 1
        if _groups.depth == 0:
            _groups.kept, _groups.receives = [], []
    if receives:
        _deliver_receives(receives)
