"""Outer synchronization for PyTorch (DiLoCo): train on each rank's own data for
sync_every steps without communication, then average the pseudo-gradients and take
an outer Nesterov step, every rank alike (include/gradcomm/outer_sync.h,
docs/outer-sync.md)."""
import math

import torch

from .. import _gradcomm as _C
from .._handle import Handle
from ..comm import Communicator
from ..errors import InvalidArgumentError
from ..reducer import compression_spec, wire_dtype_code


class OuterSync(Handle):
    """Outer synchronization of a model's (or a parameter list's) f32 parameters.

        model = MyModel().to(device)
        inner = torch.optim.AdamW(model.parameters(), lr=1e-3)
        outer = gct.OuterSync(model, comm, sync_every=100, compression="int8")
        for x, y in my_shard:                 # each rank its own data
            inner.zero_grad(); loss_fn(model(x), y).backward(); inner.step()
            outer.step()                      # communicates every sync_every / fragments steps

    Arguments (the C config's fields): sync_every (H, inner steps between two syncs
    of a fragment), fragments (the parameters cut into that many fragments of whole
    tensors, synced in turn), outer_lr (0.7), outer_momentum (0.9), nesterov (True),
    wire_dtype (None, "f16", "bf16": the pseudo-gradients' wire without compression),
    compression (None, a name such as "int8", "fp8", "fp4", or a dict
    {"kind": ..., **options}; not "powersgd"), bucket_cap_mb (25), overlap_steps (0:
    a sync is applied by the step that starts it; tau >= 1, streaming DiLoCo: it is
    averaged while the next tau inner steps run and lands after them, at most
    sync_every // fragments), mix (0.5: with overlap_steps, the weight kept of the
    parameters the tau steps made when the outer update lands). Rank 0's parameters
    are copied to every rank at creation. Do not wrap the model in
    DistributedDataParallel: the inner steps are local. With overlap_steps, keep the
    parameters' tensors as they are (no reallocation) while a sync is in flight.
    """

    _kind = "outer sync"

    def __init__(self, params, comm, *, sync_every=100, fragments=1, outer_lr=0.7, outer_momentum=0.9,
                 nesterov=True, wire_dtype=None, compression=None, bucket_cap_mb=25.0, overlap_steps=0, mix=0.5):
        spec = check_outer_sync_options(sync_every=sync_every, fragments=fragments, outer_lr=outer_lr,
                                        outer_momentum=outer_momentum, nesterov=nesterov, wire_dtype=wire_dtype,
                                        compression=compression, bucket_cap_mb=bucket_cap_mb,
                                        overlap_steps=overlap_steps, mix=mix)
        if isinstance(params, torch.nn.Module):
            params = list(params.parameters())
        params = list(params)
        if not isinstance(comm, Communicator):
            raise InvalidArgumentError("gcommInvalidArgument", f"comm must be a gradcomm.Communicator, not "
                                       f"{type(comm).__name__}")
        if not params:
            raise InvalidArgumentError("gcommInvalidArgument", "OuterSync needs at least one parameter")
        for i, p in enumerate(params):
            if p.dtype != torch.float32 or not p.is_contiguous():
                raise InvalidArgumentError("gcommInvalidArgument", f"parameter {i} is {p.dtype}"
                                           f"{'' if p.is_contiguous() else ', not contiguous'}: outer "
                                           "synchronization keeps contiguous float32 parameters")
        self.params = params
        self.comm = comm
        self.device = params[0].device
        handle = _C.outer_sync_create(comm.handle, [(p.data_ptr(), p.numel(), _C.DataType.Float32) for p in params],
                                      int(sync_every), int(fragments), float(outer_lr), float(outer_momentum),
                                      int(bool(nesterov)), wire_dtype_code(wire_dtype), spec,
                                      int(bucket_cap_mb * (1 << 20)), int(overlap_steps), float(mix))
        self._own(handle, _C.outer_sync_destroy, keep=(comm,))

    def _stream(self):
        return torch.cuda.current_stream(self.device).cuda_stream if self.device.type == "cuda" else 0

    def step(self):
        """After each inner optimizer step, on every rank. Returns True when a
        fragment's outer step was applied by this call (its parameters now the new
        outer ones, or with overlap_steps their mix with the steps since)."""
        with torch.no_grad():
            return _C.outer_sync_step(self.handle, self._stream()) == 1

    def stats(self):
        """{"inner_steps", "syncs", "skipped_syncs", "values", "bytes_sent"}."""
        return _C.outer_sync_stats(self.handle)

    def state_dict(self):
        """The outer state (outer parameters, momentum, step count, the wire's error
        feedback) as {"outer_sync": bytes}. Save the model and the inner optimizer
        beside it."""
        return {"outer_sync": _C.outer_sync_save_state(self.handle)}

    def load_state_dict(self, state):
        """Loads a state of an OuterSync with the same shapes, fragments and wire
        (refused otherwise, changing nothing). Load the model's parameters as saved."""
        if not isinstance(state, dict) or "outer_sync" not in state:
            raise InvalidArgumentError("gcommInvalidArgument", "not an OuterSync state (no 'outer_sync' key: a "
                                       "DistributedDataParallel's communication state?)")
        _C.outer_sync_load_state(self.handle, state["outer_sync"])


def check_outer_sync_options(*, sync_every, fragments, outer_lr, outer_momentum, nesterov, wire_dtype, compression,
                             bucket_cap_mb, overlap_steps=0, mix=0.5):
    """OuterSync's arguments checked in Python (the C call checks them again); returns
    the compression's text form or None."""
    def number(name, value, ok, what):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not ok(value):
            raise InvalidArgumentError("gcommInvalidArgument", f"{name}={value!r}: expected {what}")
    number("sync_every", sync_every, lambda v: int(v) == v and v >= 1, "an integer >= 1")
    number("fragments", fragments, lambda v: int(v) == v and 1 <= v <= sync_every,
           f"an integer in 1..sync_every ({sync_every})")
    number("outer_lr", outer_lr, lambda v: math.isfinite(v) and v > 0, "a finite value > 0")
    number("outer_momentum", outer_momentum, lambda v: 0 <= v < 1, "a value in [0, 1)")
    number("bucket_cap_mb", bucket_cap_mb, lambda v: math.isfinite(v) and v > 0, "a finite value > 0")
    number("overlap_steps", overlap_steps, lambda v: int(v) == v and 0 <= v <= sync_every // fragments,
           f"an integer in 0..sync_every // fragments ({sync_every // fragments}): a fragment's sync lands "
           "before the next one starts")
    number("mix", mix, lambda v: 0 <= v < 1, "a value in [0, 1)")
    if not isinstance(nesterov, bool):
        raise InvalidArgumentError("gcommInvalidArgument", f"nesterov={nesterov!r}: expected True or False")
    wire_dtype_code(wire_dtype)
    if isinstance(compression, dict):
        options = dict(compression)
        spec = compression_spec(options.pop("kind", None), options)
    elif compression is None or compression == "none":
        spec = None
    else:
        spec = compression_spec(compression, {})
    if spec is not None and spec.split(":")[0] == "powersgd":
        raise InvalidArgumentError("gcommInvalidArgument", "compression='powersgd' needs each tensor's rows, "
                                   "which outer synchronization does not take; use int8, fp8 or fp4")
    return spec
