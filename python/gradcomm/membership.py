"""Training through failures (docs/fault-tolerance.md): the membership server and a
member of a fault-tolerant job, over the C API of include/gradcomm/membership.h.

    server = gradcomm.StoreServer(port=29400)      # or the gradcomm-store program
    with gradcomm.Membership(store="host:29400", min_ranks=4) as m:
        while step < steps:
            view = m.quorum()                        # same communicator until a change
            ok = True
            if view.changed:
                step = view.committed_steps
                ok = m.try_sync_state([params])      # newcomers receive the holders' state
            ok = ok and m.try_(view.communicator.all_reduce, grads, op="sum")
            if m.commit(ok):                         # every member, or none
                apply(grads / view.world_size); step += 1
"""
from dataclasses import dataclass

from . import _C
from ._handle import Handle
from .comm import Communicator, _transport
from .errors import Error
from ._buffers import parse_device


class StoreServer(Handle):
    """A membership server on threads of this process (what gradcomm-store runs)."""

    _kind = "store server"

    def __init__(self, host=None, port=0):
        self._own(_C.store_server_start(host, int(port)), _C.store_server_stop)
        self.port = _C.store_server_port(self.handle)

    def __repr__(self):
        return f"StoreServer(port={self.port}{', closed' if self.closed else ''})"


@dataclass(frozen=True)
class View:
    """Where this member stands: its generation's communicator and place in it."""
    communicator: Communicator
    generation: int
    rank: int
    world_size: int
    changed: bool           # a new generation (and communicator) since the last quorum
    holders: int            # ranks 0..holders-1 hold the state; the rest are newcomers
    committed_steps: int    # the job's step counter


def _ignore(_handle):
    """The membership owns its communicators: a Communicator over one never destroys it."""


class Membership(Handle):
    """One process's membership of a fault-tolerant job (gcommMembershipJoin)."""

    _kind = "membership"

    def __init__(self, store=None, job_key=None, name=None, min_ranks=1, quorum_timeout=None, timeout=None,
                 device="cpu", transport="auto"):
        handle = _C.membership_join(store, job_key, name, int(min_ranks), float(quorum_timeout or 0.0),
                                    float(timeout or 0.0), parse_device(device), _transport(transport))
        self._own(handle, _C.membership_leave)
        self._comm = None  # (C handle, Communicator)
        self.last_error = None

    def quorum(self):
        """The current generation's View; after a failed or reconfiguring step, the
        next generation's (agreed with the live members, its communicator built)."""
        comm, v = _C.membership_quorum(self.handle)
        if self._comm is None or self._comm[0] != comm:
            self._comm = (comm, Communicator(comm, destroy=_ignore))
        return View(self._comm[1], v.generation, v.rank, v.world_size, bool(v.changed), v.holders,
                    v.committed_steps)

    def commit(self, ok=True, why=None):
        """Votes on the step; True when every member voted ok: apply it. False:
        discard it (every member got False). Without ``why``, a failed step sends
        ``last_error`` as the reason."""
        if not ok and why is None and self.last_error is not None:
            why = str(self.last_error)
        return _C.membership_commit(self.handle, bool(ok), why)

    @property
    def change_pending(self):
        """True when the next quorum() makes a new generation."""
        return _C.membership_change_pending(self.handle)

    def sync_state(self, tensors, stream=None):
        """Newcomers receive ``tensors`` (dense, on the communicator's device, even
        byte sizes) from the holders; nothing moves when nobody is new."""
        comm = self._comm[1] if self._comm else None
        if comm is None:
            from .errors import InvalidStateError
            raise InvalidStateError("gcommInvalidState", "call quorum() first")
        spans = [comm._span(t, f"tensors[{i}]") for i, t in enumerate(tensors)]
        _C.membership_sync_state(self.handle, [a for a, _ in spans], [b for _, b in spans],
                                 comm._stream(stream))

    def try_sync_state(self, tensors, stream=None):
        """sync_state, returning False (and the error in ``last_error``) when a member failed meanwhile."""
        return self.try_(self.sync_state, tensors, stream=stream)

    def try_(self, call, *args, **kwargs):
        """Runs ``call``; False (the error kept in ``last_error``) if a gradcomm error ended it."""
        try:
            call(*args, **kwargs)
            return True
        except Error as e:
            self.last_error = e
            return False

    @property
    def change(self):
        """What changed at the last new generation."""
        return _C.membership_change(self.handle)

    @property
    def stats(self):
        """The counters of gcommMembershipStats_t, as a dict."""
        s = _C.membership_stats(self.handle)
        return {k: getattr(s, k) for k in s.__fields__}

    def close(self):
        """Leaves the job (its communicator is destroyed); the others go on."""
        self._comm = None
        super().close()
