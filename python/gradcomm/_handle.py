"""Deterministic and garbage-collected release of native handles."""
import weakref

from .errors import InvalidStateError


class Handle:
    """Owns one native handle: closed by close(), by ``with``, or by the collector.

    ``keep`` are objects the handle depends on (a reducer's communicator and
    scaler): they stay alive until this handle is destroyed, so the collector
    can never destroy them first.
    """

    _kind = "handle"

    def _own(self, handle, destroy, keep=()):
        self._handle = handle
        self._finalizer = weakref.finalize(self, _destroy_quietly, destroy, handle, tuple(keep))

    @property
    def handle(self):
        """The C handle as an integer (for code calling the C API itself)."""
        if not self._finalizer.alive:
            raise InvalidStateError("gcommInvalidState", f"this {self._kind} was closed")
        return self._handle

    @property
    def closed(self):
        return not self._finalizer.alive

    def close(self):
        """Destroys the native object now; later calls raise InvalidStateError.
        If the library refuses (an allocator with blocks still held), the error
        is raised and the handle stays open and usable."""
        if self._finalizer.alive:
            _, _, (destroy, handle, _keep), _ = self._finalizer.peek()
            destroy(handle)
            self._finalizer.detach()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _destroy_quietly(destroy, handle, keep):
    del keep  # released after the destroy
    try:
        destroy(handle)
    except Exception:  # noqa: BLE001 - nothing can be raised from the collector
        pass
