"""What DistributedDataParallel(membership=...) moves when a generation changes
(docs/fault-tolerance.md, "PyTorch"): the model's parameters and buffers, the
optimizer's state, an LR scheduler's and a GradScaler's (rank 0's compression
shared state is broadcast to every member by the wrapper itself).

Newcomers cannot know the shapes of an optimizer's state (Adam creates it at its
first step), so rank 0 (a holder) broadcasts a *skeleton*: the state dicts with
every large tensor on the communicator's device replaced by its shape and dtype
(small ones, and those elsewhere such as Adam's CPU "step", travel inside it).
The large tensors then move with gcommMembershipSyncState: in 4 MiB chunks from
every holder at once. Holders hold identical state (every step commits
everywhere or nowhere), so each one's own tensors, walked in the same order, are
what the skeleton describes.
"""
from dataclasses import dataclass

import torch

# Below this many bytes a tensor travels inside the pickled skeleton.
_BY_VALUE_BYTES = 256


@dataclass(frozen=True)
class Step:
    """What DistributedDataParallel.start_step() returns: this step's place in the job."""
    index: int          # the job's committed steps before this one: the step's number from 0
    rank: int           # this member's rank in the live world
    world_size: int     # the live world: the divisor of this step's average
    generation: int     # the membership generation the step runs in
    changed: bool       # a new generation began at this step (someone left or joined)
    holders: int        # ranks 0..holders-1 held the state; the rest received it


@dataclass(frozen=True)
class _Spec:
    shape: tuple
    dtype: torch.dtype


def _movable(t, device):
    """Whether sync_state can move tensor t (on the communicator's device, dense, even bytes)."""
    size = t.numel() * t.element_size()
    return t.device == device and t.is_contiguous() and not t.is_sparse and size >= _BY_VALUE_BYTES \
        and size % 2 == 0


def _map_leaves(obj, leaf):
    """obj (dicts, lists and tuples of leaves) with leaf(x) for each leaf, walked in order."""
    if isinstance(obj, dict):
        return {k: _map_leaves(v, leaf) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map_leaves(v, leaf) for v in obj)
    return leaf(obj)


def split(obj, device, tensors):
    """obj with each movable tensor replaced by a _Spec (the tensor appended to
    `tensors`, in walk order); other tensors are copied to the CPU, by value."""
    def leaf(x):
        if not isinstance(x, torch.Tensor):
            return x
        if _movable(x, device):
            tensors.append(x.detach())
            return _Spec(tuple(x.shape), x.dtype)
        return x.detach().to("cpu", copy=True)
    return _map_leaves(obj, leaf)


def fill(obj, device, tensors):
    """The skeleton with a fresh tensor for each _Spec (appended to `tensors`, in walk order)."""
    def leaf(x):
        if not isinstance(x, _Spec):
            return x
        tensors.append(torch.empty(x.shape, dtype=x.dtype, device=device))
        return tensors[-1]
    return _map_leaves(obj, leaf)


def broadcast_bytes(comm, data, device, stream):
    """Rank 0's bytes on every rank (`data` is ignored elsewhere)."""
    length = torch.zeros(1, dtype=torch.int64, device=device)
    if comm.rank == 0:
        length[0] = len(data)
    comm.broadcast(length.view(torch.float16), root=0, stream=stream)
    n = int(length.item())
    raw = torch.zeros(n + (n % 2), dtype=torch.uint8, device=device)
    if comm.rank == 0:
        raw[:n].copy_(torch.frombuffer(bytearray(data), dtype=torch.uint8))
    if raw.numel():
        comm.broadcast(raw.view(torch.float16), root=0, stream=stream)
    return raw[:n].cpu().numpy().tobytes()


def state_of(optimizer, scheduler, scaler):
    """This member's optimizer, scheduler and GradScaler state (None for those it lacks)."""
    return {"optimizer": optimizer.state_dict() if optimizer is not None else None,
            "scheduler": scheduler.state_dict() if scheduler is not None else None,
            "scaler": scaler.state_dict() if scaler is not None else None}

