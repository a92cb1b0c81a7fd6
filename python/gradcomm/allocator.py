"""gradcomm's caching allocator: its statistics and summary from Python."""
from . import _gradcomm as _C
from ._buffers import parse_device
from ._handle import Handle


class Allocator(Handle):
    _kind = "allocator"

    def __init__(self, device="cpu", *, kind="default", pool_limit=None, release_threshold=None,
                 max_split_size=None):
        c = _C.AllocatorConfig()
        c.kind = {"default": _C.MemoryKind.Default, "device": _C.MemoryKind.Device,
                  "pinned_host": _C.MemoryKind.PinnedHost, "host": _C.MemoryKind.Host}[kind]
        if pool_limit is not None:
            c.pool_limit = int(pool_limit)
        if release_threshold is not None:
            c.release_threshold = int(release_threshold)
        if max_split_size is not None:
            c.max_split_size = int(max_split_size)
        self._own(_C.allocator_create(parse_device(device), c), _C.allocator_destroy)

    def malloc(self, nbytes, stream=0):
        return _C.allocator_malloc(self.handle, int(nbytes), stream)

    def free(self, address, stream=0):
        _C.allocator_free(self.handle, address, stream)

    def stats(self):
        """AllocatorStats: allocated/reserved/... bytes (current, peak, totals) and counters."""
        return _C.allocator_stats(self.handle)

    def summary(self):
        """A table like torch.cuda.memory_summary()."""
        return _C.allocator_summary(self.handle)

    def release_cached(self):
        _C.allocator_release_cached(self.handle)

    def reset_peak_stats(self):
        _C.allocator_reset_peak_stats(self.handle)
