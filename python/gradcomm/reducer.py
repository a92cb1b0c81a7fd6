"""The reducer: gradients registered once, marked ready during backward, reduced
in buckets while backward goes on, finalized before the optimizer step."""
import json

from . import _gradcomm as _C
from ._handle import Handle
from .errors import InvalidArgumentError

_WIRE = {None: _C.WIRE_SAME_AS_GRAD, "f32": int(_C.DataType.Float32), "f16": int(_C.DataType.Float16),
         "bf16": int(_C.DataType.Bfloat16), "float32": int(_C.DataType.Float32),
         "float16": int(_C.DataType.Float16), "bfloat16": int(_C.DataType.Bfloat16)}
_UNUSED = {"error": _C.UNUSED_ERROR, "zero": _C.UNUSED_AS_ZERO}
# gcommBucketAutotune_t: None is the C default (on for host links with the default caps).
_AUTOTUNE = {None: 0, True: 1, False: 2}


def wire_dtype_code(wire_dtype):
    """None (each gradient's own dtype), "f32"/"f16"/"bf16", or a torch dtype."""
    key = str(wire_dtype).replace("torch.", "") if wire_dtype is not None else None
    if key not in _WIRE:
        raise InvalidArgumentError("gcommInvalidArgument", f"wire_dtype {wire_dtype!r}: expected None, 'f32', 'f16' "
                                   "or 'bf16' (or the torch dtypes)")
    return _WIRE[key]


class Reducer(Handle):
    """Low-level reducer over ``grads``: a list of (address, count, dtype) with
    dtype a gradcomm.DataType; address 0 with grad_as_bucket_view (gradcomm then
    owns the gradients; read their addresses with grad_data). Arguments are the
    C config's fields (docs/reducer.md)."""

    _kind = "reducer"

    def __init__(self, comm, grads, *, bucket_cap_bytes=25 << 20, first_bucket_bytes=1 << 20, wire_dtype=None,
                 grad_as_bucket_view=False, average=True, unused="error", rebuild_buckets=True, sharded=False,
                 scaler=None, bucket_autotune=None):
        if unused not in _UNUSED:
            raise InvalidArgumentError("gcommInvalidArgument", f"unused {unused!r}: expected 'error' or 'zero'")
        if not any(bucket_autotune is k for k in _AUTOTUNE):
            raise InvalidArgumentError("gcommInvalidArgument", f"bucket_autotune {bucket_autotune!r}: expected None "
                                       "(on for a host link with the default caps), True or False")
        c = _C.ReducerConfig()
        c.bucket_cap_bytes = int(bucket_cap_bytes)
        c.first_bucket_bytes = int(first_bucket_bytes)
        c.wire_dtype = wire_dtype_code(wire_dtype)
        c.grad_as_bucket_view = int(bool(grad_as_bucket_view))
        c.average = int(bool(average))
        c.unused_grads = _UNUSED[unused]
        c.rebuild_buckets = int(bool(rebuild_buckets))
        c.mode = _C.MODE_SHARDED if sharded else _C.MODE_ALL_REDUCE
        c.scaler = scaler.handle if scaler is not None else 0
        c.bucket_autotune = _AUTOTUNE[bucket_autotune]
        grads = [(int(p), int(n), _C.DataType(int(d))) for p, n, d in grads]
        self._own(_C.reducer_create(comm.handle, grads, c), _C.reducer_destroy, keep=(comm, scaler))
        self.comm = comm
        self.scaler = scaler
        self.num_grads = len(grads)

    def begin_step(self, sync=True):
        _C.reducer_begin_step(self.handle, int(bool(sync)))

    def mark_ready(self, index, stream=0, data=None):
        """Gradient ``index`` is complete on ``stream``. With ``data`` (its current
        address) the call is refused if gradcomm has it elsewhere."""
        if data is None:
            _C.reducer_mark_ready(self.handle, index, stream)
        else:
            _C.reducer_mark_ready_at(self.handle, index, data, stream)

    def finalize(self, stream=0, want_skip=False):
        """Ends the step; with want_skip returns whether it saw Inf/NaN (syncs)."""
        return _C.reducer_finalize(self.handle, stream, want_skip)

    def grad_data(self, index):
        return _C.reducer_grad_data(self.handle, index)

    def set_grad_data(self, index, address):
        _C.reducer_set_grad_data(self.handle, index, address)

    def set_all_grad_data(self, addresses):
        _C.reducer_set_all_grad_data(self.handle, [int(a) for a in addresses])

    def grad_norm(self, stream=0):
        """Address of the device scalar holding the last step's global L2 norm."""
        return _C.reducer_grad_norm(self.handle, stream)

    def clip_grad_norm(self, max_norm, stream=0):
        return _C.reducer_clip_grad_norm(self.handle, float(max_norm), stream)

    def found_inf(self):
        """Address of the last synced step's Inf/NaN flag (a float on the device)."""
        return _C.reducer_found_inf(self.handle)

    def stats(self):
        return _C.reducer_stats(self.handle)

    def set_timing(self, on=True):
        """Step timing on or off (default: on for host communicators, off on a GPU)."""
        _C.reducer_set_timing(self.handle, bool(on))

    def step_timing(self):
        """The last measured synced step: step, measured_steps, step_us, backward_us,
        comm_us, overlapped_comm_us and overlap (the fraction of communication that ran
        while backward was still producing gradients), and stride (one synced step in
        stride is measured, keeping timing's cost within 0.5% of a step or 5 us).
        step == 0: none measured yet."""
        return _C.reducer_step_timing(self.handle)

    def bucket_autotune(self):
        """The bucket cap chosen for the link (docs/reducer.md "Buckets sized for the
        link"): state ("off", "measuring", "chosen", "skipped"), chosen_at_step,
        bucket_cap_bytes and first_bucket_bytes in use, configured_cap_bytes,
        link_alpha_us and link_bytes_per_s (this rank's probe), backward_us, and when
        the last bucket ends, from the previous step's end, predicted from every rank's
        measurements with the chosen and the configured cap (predicted_us,
        predicted_configured_us)."""
        return _C.reducer_bucket_autotune(self.handle)

    def note_step_mark(self, mark):
        """Tells straggler attribution that the optimizer step ended ("optimizer_done")
        or that this step's forward begins ("forward_start"): with them a late rank's
        time is split into optimizer, data loading and compute (docs/observability.md)."""
        marks = {"optimizer_done": 1, "forward_start": 2}
        if mark not in marks:
            raise InvalidArgumentError("gcommInvalidArgument",
                                       f"mark {mark!r} is not one of {', '.join(map(repr, marks))}")
        _C.reducer_note_step_mark(self.handle, marks[mark])

    def straggler_report(self):
        """The last window's straggler verdict: windows (judged so far; 0: none yet),
        first_step/last_step, late_rank (-1: nobody was late on most of the window's
        steps), late_steps of window_steps, phase ('optimizer', 'data', 'compute',
        'link' or None), late_ms (median), the window's last step alone
        (last_step_late_rank, last_step_phase, last_step_late_ms), and
        clock_offset_us (this rank's steady clock minus rank 0's).
        GRADCOMM_STRAGGLER_WINDOW sets the window (default 10 synced steps)."""
        return _C.reducer_straggler_report(self.handle)

    def nonfinite_report(self):
        """Where the last window's non-finite gradients came from: nonfinite_steps (steps
        on which some rank's own gradient was Inf/NaN before the reduction), source_rank
        and source_grad (its first such gradient, by registration index; -1: none),
        source_steps, alone_steps (of those, the steps on which it was the only rank)."""
        return _C.reducer_nonfinite_report(self.handle)

    def start_trace(self, path, steps=20):
        """A Chrome trace of the next `steps` synced steps into `path` (%r: rank, %h:
        host, %p: pid); open it in https://ui.perfetto.dev or chrome://tracing, or draw
        it with tools/gradcomm_trace_plot.py. Written after its last step."""
        _C.reducer_start_trace(self.handle, str(path), int(steps))

    def stop_trace(self):
        """Writes a running trace now with the steps measured so far."""
        _C.reducer_stop_trace(self.handle)

    def describe(self):
        """The bucket plan, one line per bucket."""
        return _C.reducer_describe(self.handle)

    def enable_compression(self, kind, rows=None, **options):
        """Sends the buckets with compression `kind` ("powersgd", "int8", "fp8", "fp4"; docs/compression.md)
        from now on, its options named as the fields of its config struct
        (enable_compression("int8", block_size=128)). rows: each gradient's first
        dimension (0: not a matrix), which PowerSGD needs. Every rank makes the same call,
        between steps, once."""
        spec = compression_spec(kind, options)
        if rows is not None:
            rows = [int(r) for r in rows]
            if len(rows) != self.num_grads:
                raise InvalidArgumentError("gcommInvalidArgument", f"rows has {len(rows)} entries for "
                                           f"{self.num_grads} gradients")
        _C.reducer_enable_compression(self.handle, spec, rows)

    def compression(self):
        """The compression in use: "none", "powersgd", "int8", "fp8", "fp4"."""
        return json.loads(_C.reducer_describe_compression(self.handle))["kind"]

    def compression_stats(self):
        """The compression's statistics as a dict named as its C stats struct's fields
        ({"compressed_steps": ..., "bytes_last_step": ...}); empty without compression."""
        return json.loads(_C.reducer_describe_compression(self.handle))["stats"]

    def compression_state(self, shared=False):
        """The compression's state (step counter, error feedback, PowerSGD's Q) as
        bytes; shared=True: only what every rank holds alike (the step counter,
        PowerSGD's Q), the same bytes on every rank (gcommCompressionStateShared)."""
        return _C.reducer_save_compression_state(self.handle, bool(shared))

    def load_compression_state(self, data, carry=False):
        """Loads this rank's state, or a shared state of any rank. carry=True: this
        process's state saved by its reducer of an earlier membership generation
        (another world size or rank; gcommReducerCarryCompressionState)."""
        _C.reducer_load_compression_state(self.handle, bytes(data), bool(carry))


def compression_spec(kind, options):
    """The text form of a compression (gcommReducerEnableCompressionText):
    "int8:block_size=128,error_feedback=false"."""
    if not isinstance(kind, str) or not kind or any(c in kind for c in ":,="):
        raise InvalidArgumentError("gcommInvalidArgument", f"compression kind {kind!r} is not a name such as "
                                   "'powersgd' or 'int8'")
    items = []
    for key, value in options.items():
        if not key or any(c in key for c in ":,= "):
            raise InvalidArgumentError("gcommInvalidArgument", f"compression option name {key!r} holds ':', ',', "
                                       "'=' or a space")
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, float):
            value = repr(value)
        value = str(value)
        if any(c in value for c in ",="):
            raise InvalidArgumentError("gcommInvalidArgument", f"compression option {key}={value!r} holds ',' or '='")
        items.append(f"{key}={value}")
    return kind + (":" + ",".join(items) if items else "")


def straggler_line(report):
    """One line saying what a straggler report found (the Lightning strategy's log line)."""
    steps = f"synced steps {report.first_step}-{report.last_step}"
    if report.late_rank < 0:
        return f"gradcomm: no rank was late on most of {steps}"
    where = {"optimizer": "the optimizer step", "data": "data loading (before forward)",
             "compute": "forward and backward", "link": "its link (its gradients were ready on time)"}
    return (f"gradcomm: rank {report.late_rank} was late on {report.late_steps} of {steps} by "
            f"{report.late_ms:.0f} ms (median), in {where.get(report.phase, report.phase)}; every rank waited for it")
