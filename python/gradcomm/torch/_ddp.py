"""gradcomm.torch.DistributedDataParallel: torch DDP's interface on gradcomm's reducer.

How gradients reach gradcomm. Each parameter has a gradient *slot* registered
with the reducer once: a tensor the wrapper owns (or, with
gradient_as_bucket_view, a view of gradcomm's bucket). The parameter's
post-accumulate-grad hook makes ``p.grad`` that slot: if autograd accumulated
into the slot (the steady state with ``zero_grad(set_to_none=False)``) nothing is
copied; if ``p.grad`` is some other tensor (``zero_grad()``'s default
set_to_none=True, an optimizer or user code assigning ``p.grad``, a first step)
its values are copied into the slot and ``p.grad`` is pointed at it. The engine
therefore only ever touches memory the wrapper keeps alive, whatever the caller
does to ``.grad`` (torch's own DDP also copies gradients into its buckets unless
gradient_as_bucket_view is set). Mark-ready calls pass the slot's address
(gcommReducerMarkReadyAt), so a slot that moved is refused, never followed.

A step begins at the first hook of a backward pass and is finalized by a
callback queued on autograd's engine, which runs when backward ends: as with
DDP, the optimizer sees averaged gradients without any extra call.
"""
import contextlib
import math
import pickle
import threading
import warnings
import weakref

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook as _register_optimizer_step_post_hook

from .. import _gradcomm as _C
from .._buffers import parse_device
from ..comm import Communicator, init_from_env
from ..errors import DivergenceError, Error, InvalidArgumentError, InvalidStateError
from . import _fault_tolerance as _ft
from ..reducer import Reducer, wire_dtype_code

# What runs around the module's forward (checks, the buffers' broadcast) touches
# gradcomm's handles, whose weakref finalizers torch.compile cannot guard on ("Guard
# failed on the same frame it was created"): it runs eagerly, and the module's own
# forward is compiled, as torch's DDP keeps its communication out of the graph.
_eager = getattr(getattr(torch, "compiler", None), "disable", lambda f: f)

_DTYPES = {torch.float32: _C.DataType.Float32, torch.float16: _C.DataType.Float16,
           torch.bfloat16: _C.DataType.Bfloat16}


class UnusedParametersError(InvalidStateError):
    """Parameters that received no gradient in a synced step (``names``)."""

    def __init__(self, names, detail):
        shown = ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
        super().__init__("gcommInvalidState",
                         f"{len(names)} parameter(s) received no gradient in this step: {shown}. Every rank completed "
                         "the step as if they were zero (so no rank hangs or diverges) but the step must not be "
                         "applied. Pass unused_parameters='zero' (DDP's find_unused_parameters=True) if parts of the "
                         f"model are skipped on purpose. ({detail})")
        self.names = names


def _torch_device_of(comm):
    d = comm.device
    return torch.device("cpu") if d.kind == _C.DeviceKind.Host else torch.device("cuda", d.ordinal)


def _is_local(comm):
    return comm.transport == _C.Transport.Local


def _comm_device_for(device):
    return "cpu" if device.type == "cpu" else f"cuda:{device.index if device.index is not None else 0}"


def _compression_options(compression, powersgd, quantize):
    """The one compression a wrapper was given, as {"kind": name, **options}, or None."""
    given = [c for c in ((compression, None), (powersgd, "powersgd"), (quantize, "int8")) if c[0] is not None]
    if len(given) > 1:
        raise InvalidArgumentError("gcommInvalidArgument", "give one of compression=, powersgd= and quantize= "
                                   "(one compression per model)")
    if not given:
        return None
    value, kind = given[0]
    if kind is not None:
        old = "powersgd" if kind == "powersgd" else "quantize"
        warnings.warn(f"{old}= is an older spelling of compression={{'kind': '{kind}', ...}}: pass "
                      f"compression={{'kind': '{kind}', **options}} (docs/compression.md); {old}= will go",
                      FutureWarning, stacklevel=4)
        return {"kind": kind, **dict(value)}
    if isinstance(value, str):
        return None if value.strip() == "none" else {"kind": value}
    options = dict(value)
    if "kind" not in options:
        raise InvalidArgumentError("gcommInvalidArgument", f"compression={value!r} has no 'kind' (e.g. "
                                   "{'kind': 'int8', 'block_size': 128})")
    return options


def _positive(name, value, none_means=None):
    """A positive, finite number (or None where none_means says what None is), else
    InvalidArgumentError naming the option."""
    if value is None and none_means is not None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InvalidArgumentError("gcommInvalidArgument", f"{name} must be a positive number of "
                                   f"{'seconds' if name == 'timeout' else 'MiB'}"
                                   f"{f' (or None: {none_means})' if none_means else ''}, not {value!r}")
    return value


def _flag(name, value):
    if not isinstance(value, bool):
        raise InvalidArgumentError("gcommInvalidArgument", f"{name} must be True or False, not {value!r}")
    return value


def check_options(bucket_cap_mb=None, first_bucket_mb=1.0, gradient_as_bucket_view=False, unused_parameters=None,
                  find_unused_parameters=False, wire_dtype=None, powersgd=None, broadcast_buffers=True, timeout=None,
                  quantize=None, compression=None, divergence_check_every=0, bucket_autotune=None,
                  try_compression=True):
    """Checks DistributedDataParallel's options (every one but module and comm)
    before anything is made, and returns them normalized: reducer options, the
    compression ({"kind": ..., **options} or None), broadcast_buffers, timeout,
    divergence_check_every. With
    try_compression the compression is enabled on a throwaway reducer of one
    local rank, so gradcomm's own checks of its kind and options (the compression
    table's) refuse a bad one now, with their message. The Lightning strategy
    calls it when the Trainer is built."""
    _positive("bucket_cap_mb", bucket_cap_mb, none_means="25, chosen for the link on a host")
    _positive("first_bucket_mb", first_bucket_mb)
    if bucket_autotune is not None:
        _flag("bucket_autotune", bucket_autotune)
    # A cap the user chose is kept unless they ask for the autotune too.
    autotune = bucket_autotune if bucket_autotune is not None else (None if bucket_cap_mb is None else False)
    _positive("timeout", timeout, none_means="GRADCOMM_TIMEOUT_S, else 300 s")
    if isinstance(divergence_check_every, bool) or not isinstance(divergence_check_every, int) \
            or divergence_check_every < 0:
        raise InvalidArgumentError("gcommInvalidArgument", f"divergence_check_every must be a whole number of forward "
                                   f"passes >= 0 (0: never), not {divergence_check_every!r}")
    for name, value in (("gradient_as_bucket_view", gradient_as_bucket_view),
                        ("find_unused_parameters", find_unused_parameters),
                        ("broadcast_buffers", broadcast_buffers)):
        _flag(name, value)
    if unused_parameters is None:
        unused_parameters = "zero" if find_unused_parameters else "error"
    if unused_parameters not in ("error", "zero"):
        raise InvalidArgumentError("gcommInvalidArgument", f"unused_parameters {unused_parameters!r}: expected "
                                   "'error' or 'zero'")
    wire_dtype_code(wire_dtype)  # None, a torch dtype, or its name ("float16", "f16", ...)
    reducer_options = dict(bucket_cap_bytes=int((25.0 if bucket_cap_mb is None else bucket_cap_mb) * (1 << 20)),
                           first_bucket_bytes=int(first_bucket_mb * (1 << 20)), wire_dtype=wire_dtype,
                           grad_as_bucket_view=gradient_as_bucket_view, unused=unused_parameters,
                           bucket_autotune=autotune)
    compression = _compression_options(compression, powersgd, quantize)
    if compression is not None and try_compression:
        _try_compression(compression, reducer_options)
    return reducer_options, compression, broadcast_buffers, timeout, divergence_check_every


def _try_compression(compression, reducer_options):
    """Enables `compression` on a reducer of one local rank over a small matrix."""
    from ..comm import init_local
    (comm,) = init_local(1, "cpu")
    try:
        grad = torch.zeros(4, 4)
        specs = [(0 if reducer_options["grad_as_bucket_view"] else grad.data_ptr(), 16, _C.DataType.Float32)]
        with Reducer(comm, specs, **reducer_options) as reducer:
            kind_and_options = dict(compression)
            reducer.enable_compression(kind_and_options.pop("kind"), [4], **kind_and_options)
    finally:
        comm.close()


# The open wrappers, to find one over the same parameters (a module wrapped again).
_open_wrappers = weakref.WeakSet()
_open_wrappers_lock = threading.Lock()


def _remove_hooks(hooks):
    """The wrapper's hooks go with it (closed, replaced, or collected)."""
    for h in hooks:
        h.remove()
    hooks.clear()


# Straggler attribution's optimizer mark: one PyTorch global post-step hook for the
# process, registered once and never removed, marks the live wrappers whose parameters
# the stepped optimizer holds. A hook per wrapper added and removed torch's global hook
# dict while another rank's thread iterated it in its optimizer step ("OrderedDict
# mutated during iteration", local ranks as threads). Marking every wrapper, as the
# first version of this hook did, had one rank's thread take another rank's reducer
# lock inside that rank's step: with local ranks as threads the two waited for each
# other until the timeout (test_fp4_wire.py in the clean-clone run of ac0a8ed).
_marked_wrappers = weakref.WeakSet()
_marked_lock = threading.Lock()
_marks_hook = None


def _mark_optimizer_steps(wrapper):
    global _marks_hook
    with _marked_lock:
        _marked_wrappers.add(wrapper)
        if _marks_hook is None:
            _marks_hook = _register_optimizer_step_post_hook(_optimizer_step_done)


def _unmark_optimizer_steps(wrapper):
    with _marked_lock:
        _marked_wrappers.discard(wrapper)


def _optimizer_step_done(optimizer, args, kwargs):
    # A compiled optimizer step goes unmarked: no graph break in any optimizer.
    if torch.compiler.is_compiling():
        return
    with _marked_lock:
        wrappers = list(_marked_wrappers)
    stepped = [p for group in optimizer.param_groups for p in group["params"]]
    for w in wrappers:
        if not any(id(p) in w._param_ids for p in stepped):
            continue  # another model's optimizer (another rank's, with ranks as threads)
        try:
            w._note_step_mark("optimizer_done")
        except Error:  # a wrapper closed by another thread meanwhile: a mark is best effort
            pass


class JoinedRankError(RuntimeError):
    """join(throw_on_early_termination=True): a rank ran out of inputs; every rank raises."""

    def __init__(self, joined, world):
        super().__init__(f"{joined} of {world} rank(s) ran out of inputs inside join(throw_on_early_termination=True): "
                         "every rank stops here")
        self.joined = joined


class DistributedDataParallel(torch.nn.Module):
    """Wraps ``module`` like torch.nn.parallel.DistributedDataParallel.

    Arguments (torch DDP's name where one exists):
      comm: a gradcomm.Communicator; None creates one from the launcher's
        environment (torchrun, mpirun, srun) on the module's device and closes it
        with the wrapper.
      bucket_cap_mb (None: 25, and on a host link chosen for the link after the
        first steps; docs/reducer.md "Buckets sized for the link"), first_bucket_mb
        (1): bucket sizes in wire bytes.
      bucket_autotune (None | bool): None: on when bucket_cap_mb is None and
        first_bucket_mb is 1 (on a host link: CPU tensors); True: also with your bucket_cap_mb (refused on a GPU,
        with gradient_as_bucket_view); False: never. bucket_autotune() says what
        it measured and chose.
      gradient_as_bucket_view (False): the gradients live in gradcomm's buckets.
      unused_parameters ("error" | "zero"); find_unused_parameters=True means "zero".
      wire_dtype (None | torch.float16 | torch.bfloat16 | torch.float32, or their
        names "float16", "bfloat16", "float32", "f16", "bf16", "f32"): what goes
        on the wire (DDP's fp16_compress_hook / bf16_compress_hook).
      compression (None | str | dict): how the buckets cross the wire
        (docs/compression.md): a name ("powersgd", "int8", "fp8", "fp4"; "none" is
        None) or a dict with
        "kind" and the kind's options, e.g. {"kind": "powersgd", "rank": 2}
        (PowerSGD: rank, start_iter, warm_start, error_feedback,
        min_compression_rate, orthogonalization_eps, seed; int8: block_size
        (256), error_feedback (True), start_iter (0), not with
        gradient_as_bucket_view; fp8: format ("e4m3", "e5m2") and int8's;
        fp4: int8's, block_size 64).
      powersgd, quantize (None | dict): older spellings of
        compression={"kind": "powersgd" | "int8", **options}; they warn
        (FutureWarning) and will go.
      broadcast_buffers (True): rank 0's buffers are broadcast at every forward.
      timeout (None | seconds > 0): of the communicator made with comm=None (None:
        GRADCOMM_TIMEOUT_S, else 300 s).
      divergence_check_every (0): every that many training forward passes (outside
        join()), the divergence check over the parameters before the forward
        (check_divergence()); ranks whose parameters differ from the majority's
        raise gradcomm.DivergenceError on every rank, naming them and the first
        parameter. 0: never.
      membership (None | gradcomm.Membership): train through failures
        (docs/fault-tolerance.md): the communicator is the membership's live
        world, each training step opens with start_step() and ends with commit(),
        which says whether to apply it (every member, or none); newcomers receive
        the parameters, buffers, optimizer, scheduler, GradScaler and compression
        state. Not with comm, gradient_as_bucket_view, join() or no_sync().
    Bad values are refused before anything is made (check_options).

    Wrapping a module again (as a DDP user does after adding a parameter)
    replaces the earlier wrapper over any of the same parameters: its hooks go,
    its reducer is released, and calling it raises. A wrapper dropped without
    close() is freed with its hooks and reducer, as a dropped DDP is.
    """

    def __init__(self, module, comm=None, *, bucket_cap_mb=None, first_bucket_mb=1.0, gradient_as_bucket_view=False,
                 unused_parameters=None, find_unused_parameters=False, wire_dtype=None, powersgd=None,
                 broadcast_buffers=True, timeout=None, quantize=None, compression=None, divergence_check_every=0,
                 membership=None, bucket_autotune=None):
        super().__init__()
        # Every option is checked before anything is made: a bad one is the error the
        # user sees, never a later one from cleaning up (issue 44 #9).
        options, compression, broadcast_buffers, timeout, divergence_check_every = check_options(
            bucket_cap_mb=bucket_cap_mb, first_bucket_mb=first_bucket_mb,
            gradient_as_bucket_view=gradient_as_bucket_view, unused_parameters=unused_parameters,
            find_unused_parameters=find_unused_parameters, wire_dtype=wire_dtype, powersgd=powersgd,
            broadcast_buffers=broadcast_buffers, timeout=timeout, quantize=quantize, compression=compression,
            divergence_check_every=divergence_check_every, bucket_autotune=bucket_autotune,
            try_compression=False)  # the real reducer below checks it, and is cleaned up if it refuses
        self.module = module
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not named:
            raise InvalidArgumentError("gcommInvalidArgument", "the module has no parameter that requires a gradient")
        devices = {p.device for _, p in named}
        if len(devices) > 1:
            by_dev = {str(d): next(n for n, p in named if p.device == d) for d in devices}
            raise InvalidArgumentError("gcommInvalidArgument", "the module's parameters are on several devices "
                                       f"({by_dev}); gradcomm, like DDP, takes one device per process")
        self.device = devices.pop()
        for n, p in named:
            if p.dtype not in _DTYPES:
                raise InvalidArgumentError("gcommInvalidArgument", f"parameter '{n}' has dtype {p.dtype}: gradcomm "
                                           "reduces float32, float16 and bfloat16 gradients")
        if comm is not None and not isinstance(comm, Communicator):
            raise InvalidArgumentError("gcommInvalidArgument", f"comm must be a gradcomm.Communicator, not "
                                       f"{type(comm).__name__}")
        self._check_membership(membership, comm, gradient_as_bucket_view)
        self._membership = membership
        self._owns_comm = comm is None and membership is None
        self._options = options
        self._reducer = None
        self._hooks = []
        self._released = False  # closed, or replaced by a newer wrapper (_replaced)
        self._replaced = False
        if comm is None and membership is None:
            comm = init_from_env(device=_comm_device_for(self.device), timeout=timeout)
        self.comm = comm  # with a membership: its live world's, from start_step()
        try:
            if comm is not None:
                self._check_device(comm)
            self._names = [n for n, _ in named]
            self._params = [p for _, p in named]
            self._signature = self._param_signature()
            self._compression = compression
            self._grad_scaler = None
            self.broadcast_buffers = broadcast_buffers
            self.divergence_check_every = divergence_check_every
            self._training_forwards = 0  # outside join(), counted for divergence_check_every
            self.require_backward_grad_sync = True
            self._join = None  # inside join(): its options and this step's count of ranks with inputs
            self._step_open = False
            self._marked = []
            self._steps = 0
            self._slots = []
            self._step = None       # with a membership: the Step from start_step(), until commit()
            self._step_error = None  # with a membership: the gradcomm error that ended this step
            self._carried = None    # the compression state kept across a generation change
            self.last_step_error = None
            self._holds_state = False  # with a membership: this process holds the job's state (server's rule)
            self._checked_at = None    # with a membership: the step whose divergence check ran
            self._needs_quorum = True
            if membership is None:
                self._sync_module_states()
                self._build_reducer()
        except BaseException:
            # What was made here (the reducer, a communicator of its own; no
            # gradient views the buckets yet), then the error itself.
            self._release(now=True)
            raise
        # The hooks hold the wrapper weakly, and go when it is collected: a wrapper
        # dropped without close() is freed, as a dropped DDP is (issue 44 #2).
        self._hooks = [p.register_post_accumulate_grad_hook(self._make_hook(i)) for i, p in enumerate(self._params)]
        # Straggler attribution's optimizer mark: PyTorch's global post-step hook
        # (an optimizer holding this module's parameters; the first after a step's end counts).
        self._param_ids = frozenset(id(p) for p in self._params)
        _mark_optimizer_steps(self)
        self._hooks_finalizer = weakref.finalize(self, _remove_hooks, self._hooks)
        self._take_over_parameters()

    def _check_device(self, comm):
        if self.device.type == "cuda" and comm.world_size > 1 and _is_local(comm):
            # PyTorch runs every CUDA backward of a process, whichever thread
            # called backward(), on one autograd thread per device: rank 0's hook
            # would wait inside a collective for rank 1's, which that same thread
            # can never run (seen on an H100: "rank 1 never arrived within 60 s").
            raise InvalidArgumentError(
                "gcommInvalidArgument", "DistributedDataParallel cannot drive several local ranks of one process "
                "on a GPU: PyTorch runs all of a device's backward passes on one thread, so a rank's gradient hook "
                "would wait for the other ranks' hooks forever. Use a process per rank (torchrun: NCCL when each has "
                "a GPU of its own, the cuda-ipc transport when they share one), the local ranks on the CPU, or drive "
                "gradcomm.Reducer yourself from each rank's thread after backward() (python/tests/test_torch_cuda.py "
                "shows how)")
        if _torch_device_of(comm) != self.device:
            raise InvalidArgumentError("gcommInvalidArgument", f"the module is on {self.device}, the communicator on "
                                       f"{_torch_device_of(comm)}: move the module (or create the communicator) "
                                       "on the same device")

    def _take_over_parameters(self):
        """An open wrapper over any of these parameters (the module wrapped again
        without close(), as DDP users do) stops reducing them: its hooks go and its
        reducer is released. Before, both wrappers' hooks fired and every rank
        agreed on gradients that were not the average (issue 44 #1)."""
        mine = {id(p) for p in self._params}
        with _open_wrappers_lock:
            earlier = [w for w in _open_wrappers if any(id(p) in mine for p in w._params)]
            for w in earlier:
                _open_wrappers.discard(w)
            _open_wrappers.add(self)
        for w in earlier:
            w._replaced = True
            w._release()

    def _release(self, now=False):
        """Removes the hooks and releases the reducer and a communicator of the
        wrapper's own. With gradient_as_bucket_view (unless `now`: no tensor views
        the buckets) they are left to the collector instead: a tensor may still
        view the buckets (the reducer goes with the last view, and the
        communicator with the reducer)."""
        if self._released:
            return
        self._released = True
        _unmark_optimizer_steps(self)
        _remove_hooks(self._hooks)
        if self._options["grad_as_bucket_view"] and not now:
            return
        if self._reducer is not None:
            self._reducer.close()
        if self._owns_comm:
            self.comm.close()

    # ---- training through failures (membership=) -------------------------------------

    @staticmethod
    def _check_membership(membership, comm, gradient_as_bucket_view):
        if membership is None:
            return
        from ..membership import Membership
        if not isinstance(membership, Membership):
            raise InvalidArgumentError("gcommInvalidArgument", f"membership must be a gradcomm.Membership, not "
                                       f"{type(membership).__name__}")
        if comm is not None:
            raise InvalidArgumentError("gcommInvalidArgument", "give comm or membership, not both: with a "
                                       "membership the communicator is its live world's, new at each change")
        if gradient_as_bucket_view:
            raise InvalidArgumentError("gcommInvalidArgument", "gradient_as_bucket_view cannot be used with a "
                                       "membership: a gradient viewing a bucket would keep a departed generation's "
                                       "reducer and communicator alive")

    def _require_membership(self, call):
        if self._membership is None:
            raise InvalidStateError("gcommInvalidState", f"{call} is for a wrapper made with membership= "
                                    "(docs/fault-tolerance.md)")

    @property
    def committed_steps(self):
        """The steps this model has applied: with a membership, the job's committed steps."""
        return self._steps

    def start_step(self, optimizer=None, scheduler=None):
        """Opens a training step of a fault-tolerant job (membership=): after a step
        that did not commit, or when someone waits to join, agrees the next
        generation and brings its newcomers up to date (parameters, buffers,
        ``optimizer``'s and ``scheduler``'s state, the GradScaler's, the compression's
        shared state).
        Returns a Step: draw the step's batch from (step.index, step.rank,
        step.world_size) (docs/fault-tolerance.md, "The divisor"). A failure while
        newcomers catch up is not raised: the step will not commit."""
        self._require_membership("start_step()")
        if self._released:
            raise InvalidStateError("gcommInvalidState", "this wrapper was closed")
        if self._step is not None:
            raise InvalidStateError("gcommInvalidState", "start_step() again before commit(): every step started "
                                    "is voted on")
        m = self._membership
        changed = False
        if self._needs_quorum or m.change_pending:
            self._leave_generation()
            view = m.quorum()  # raises if this member can take no further part (excluded, timed out)
            changed = True
            self._enter_generation(view, optimizer, scheduler)
        view = m.quorum()  # the same generation: no server round
        if self._grad_scaler is not None and self._grad_scaler.is_enabled():
            # Restored if the step is discarded: a member's scale rule may have run
            # at the end of its backward while another's step failed before it.
            self._scaler_before = self._grad_scaler._native.state(self._stream())
        self._step = _ft.Step(index=view.committed_steps, rank=view.rank, world_size=view.world_size,
                              generation=view.generation, changed=changed, holders=view.holders)
        return self._step

    def commit(self):
        """Ends the step with the membership's vote: True when every member
        finished it (apply it: optimizer.step()), False when it is discarded on
        every member (do not step; the next start_step() forms a new generation).
        Gradients are averaged over the step's live world (Step.world_size)."""
        self._require_membership("commit()")
        if self._step is None:
            raise InvalidStateError("gcommInvalidState", "commit() without start_step()")
        if self._step_open:
            raise InvalidStateError("gcommInvalidState", "commit() before the backward pass finished its step")
        error, self._step_error, self._step = self._step_error, None, None
        self.last_step_error = error  # what ended this member's part of the step (None: it voted ok)
        self._needs_quorum = True  # until the vote says committed (a refused vote raises)
        committed = False
        try:
            committed = self._membership.commit(error is None, None if error is None else str(error))
        finally:
            if committed:
                self._steps += 1
                self._holds_state = True  # the server's rule too: a committed step makes a holder
                self._needs_quorum = False
            elif self._grad_scaler is not None and self._grad_scaler.is_enabled():
                self._grad_scaler._native.set_state(self._scaler_before, self._stream())
        return committed

    def _fail_step(self, error):
        """A gradcomm error ended this step (a member failed): recorded for the
        vote; the rest of the step does nothing, leaving the local gradients."""
        if self._step_error is None:
            self._step_error = error
            self._membership.last_error = error
        self._step_open = False

    def _leave_generation(self):
        """The reducer goes before the communicator changes (gcommMembershipQuorum
        refuses while one uses it); a survivor keeps its compression state."""
        if self._reducer is not None:
            if self._compression is not None:
                try:
                    self._carried = self._reducer.compression_state()
                except Error:
                    self._carried = None  # a failed reducer: the next one starts fresh
            self._reducer.close()
            self._reducer = None

    def _enter_generation(self, view, optimizer, scheduler):
        """Builds this generation's reducer and brings every member to the job's
        state. _needs_quorum stays set until all of it is done: an exception
        midway (raised, not voted) makes the next start_step form another one."""
        self.comm = view.communicator
        self._check_device(self.comm)
        holder = view.rank < view.holders
        if holder and view.committed_steps > 0 and not self._holds_state:
            raise InvalidStateError(
                "gcommInvalidState", f"the job's state is lost: no member that held it is left, and this one never "
                f"finished catching up (generation {view.generation}: {self._membership.change}). Start the job "
                "again from a checkpoint")
        self._build_reducer()
        carried, self._carried = self._carried, None
        if carried is not None and holder:
            self._reducer.load_compression_state(carried, carry=True)
        self._steps = view.committed_steps
        try:
            if view.committed_steps == 0:
                self._start_alike(optimizer, scheduler)
                self._holds_state = True  # every member starts from rank 0's
            elif view.holders < view.world_size:
                self._bring_newcomers_up_to_date(view, optimizer, scheduler)
            self._adopt_shared_compression_state(holder)
        except Error as e:
            self._step_error = e
            self._membership.last_error = e
        self._needs_quorum = False

    def _adopt_shared_compression_state(self, holder):
        """Rank 0's shared compression state (step counter, PowerSGD's Q) on every
        member: a discarded step may have advanced it on the members whose reducer
        finished the step and not on the others. Holders keep their residuals;
        newcomers start with none."""
        if self._compression is None or self.comm.world_size == 1:
            return
        mine = self._reducer.compression_state(shared=True) if self.comm.rank == 0 else b""
        shared = _ft.broadcast_bytes(self.comm, mine, self.device, self._stream())
        if self.comm.rank != 0:
            self._reducer.load_compression_state(shared, carry=holder)

    def _start_alike(self, optimizer, scheduler):
        """No step committed yet: rank 0's parameters and buffers everywhere (as
        DDP's construction), and its optimizer's and scheduler's state."""
        self._sync_module_states()
        self._receive_skeleton_state(optimizer, scheduler, lambda tensors: [
            self._broadcast_tensor(t) for t in tensors])

    def _bring_newcomers_up_to_date(self, view, optimizer, scheduler):
        newcomer = view.rank >= view.holders
        movable, by_value = [], []
        for t in list(self.module.parameters()) + list(self.module.buffers()):
            (movable if _ft._movable(t, self.device) else by_value).append(t)

        def sync(tensors):
            with torch.no_grad():
                spans = [t.data for t in movable] + list(tensors)
                self._membership.sync_state(spans, stream=self._stream())
                for t in by_value:  # odd sizes, or not on this device: rank 0's, one by one
                    self._broadcast_tensor(t)
        self._receive_skeleton_state(optimizer, scheduler, sync, newcomers_only=True, newcomer=newcomer)

    def _receive_skeleton_state(self, optimizer, scheduler, move, newcomers_only=False, newcomer=True):
        """Rank 0's skeleton of the optimizer's and scheduler's state to every rank;
        `move(tensors)` moves its large tensors (each rank passes its own, in the
        skeleton's order); the receivers load what arrived."""
        scaler = self._grad_scaler if self._grad_scaler is not None and self._grad_scaler.is_enabled() else None
        mine = []  # every member walks its own state: a holder's tensors, in the skeleton's order
        skeleton = _ft.split(_ft.state_of(optimizer, scheduler, scaler), self.device, mine)
        data = pickle.dumps(skeleton) if self.comm.rank == 0 else b""
        skeleton = pickle.loads(_ft.broadcast_bytes(self.comm, data, self.device, self._stream()))
        receiving = newcomer if newcomers_only else self.comm.rank != 0
        if receiving:
            mine = []
            state = _ft.fill(skeleton, self.device, mine)
        move(mine)
        if receiving:
            if optimizer is not None and state["optimizer"] is not None:
                optimizer.load_state_dict(state["optimizer"])
            if scheduler is not None and state["scheduler"] is not None:
                scheduler.load_state_dict(state["scheduler"])
            if scaler is not None and state["scaler"] is not None:
                scaler.load_state_dict(state["scaler"])

    # ---- construction -----------------------------------------------------------

    def _param_signature(self):
        return [(id(p), tuple(p.shape), p.dtype, p.device)
                for p in self.module.parameters() if p.requires_grad]

    def _build_reducer(self):
        scaler = self._grad_scaler._native if self._grad_scaler is not None else None
        if self._options["grad_as_bucket_view"]:
            specs = [(0, p.numel(), _DTYPES[p.dtype]) for p in self._params]
        else:
            self._slots = [torch.zeros(p.shape, dtype=p.dtype, device=p.device) for p in self._params]
            specs = [(s.data_ptr(), s.numel(), _DTYPES[s.dtype]) for s in self._slots]
        old, self._reducer = self._reducer, None
        if old is not None:
            old.close()
        self._reducer = Reducer(self.comm, specs, scaler=scaler, **self._options)
        if self._options["grad_as_bucket_view"]:
            self._slots = [self._bucket_view(i) for i in range(len(self._params))]
        if self._compression is not None:
            options = dict(self._compression)
            rows = [p.shape[0] if p.dim() >= 2 else 0 for p in self._params]
            self._reducer.enable_compression(options.pop("kind"), rows, **options)
            if self._options["grad_as_bucket_view"]:  # enabling may move the gradients
                self._slots = [self._bucket_view(i) for i in range(len(self._params))]
        for p, slot in zip(self._params, self._slots):
            if p.grad is not None:  # a gradient from before wrapping is kept, in its slot
                slot.copy_(p.grad)
                p.grad = slot
        self._marked = [False] * len(self._params)

    def _bucket_view(self, i):
        p = self._params[i]
        view = _C.tensor_view(self._reducer.grad_data(i), [p.numel()], int(_DTYPES[p.dtype]),
                              int(self.comm.device.kind), max(self.comm.device.ordinal, 0), self._reducer, "torch")
        return view.view(p.shape)

    def _attach_scaler(self, scaler):
        self._check_scaler_can_attach()
        self._grad_scaler = scaler
        if self._membership is None:  # with one, the reducer is built at each new generation
            self._build_reducer()

    def _scaler_device(self):
        """The gradcomm device a GradScaler of this model lives on."""
        return self.comm.device if self.comm is not None else parse_device(_comm_device_for(self.device))

    def _check_scaler_can_attach(self):
        """Refuses a GradScaler before it is made (GradScaler's __init__ asks)."""
        if self._membership is not None and (self._step is not None or self._reducer is not None):
            raise InvalidStateError("gcommInvalidState", "create the GradScaler before the first start_step(): it "
                                    "is fused into each generation's reducer")
        if self._grad_scaler is not None:
            raise InvalidStateError("gcommInvalidState", "this model already has a GradScaler")
        if self._steps > 0 or self._step_open:
            raise InvalidStateError("gcommInvalidState", "create the GradScaler before the first backward pass: "
                                    "the scaler is fused into the reducer, which is built before any step")

    def _sync_module_states(self):
        """Rank 0's parameters and buffers everywhere (DDP does this at construction)."""
        with torch.no_grad():
            for t in list(self.module.parameters()) + list(self.module.buffers()):
                self._broadcast_tensor(t)

    def _broadcast_tensor(self, t, root=0):
        if self.comm.world_size == 1 or t.numel() == 0:
            return
        flat = t.detach()
        if not flat.is_contiguous():
            flat = flat.contiguous()
        raw = flat.reshape(-1).view(torch.uint8)
        if raw.numel() % 2:  # broadcast moves bytes: send them as 16-bit elements
            raw = torch.cat([raw, raw.new_zeros(1)])
        self.comm.broadcast(raw.view(torch.float16), root=root, stream=self._stream())
        if raw.data_ptr() != t.data_ptr() or not t.is_contiguous():
            t.detach().copy_(raw[:t.numel() * t.element_size()].view(t.dtype).view(t.shape))

    # ---- a step -------------------------------------------------------------------

    def _stream(self):
        return torch.cuda.current_stream(self.device).cuda_stream if self.device.type == "cuda" else 0

    def forward(self, *args, **kwargs):
        self._before_forward()
        return self.module(*args, **kwargs)

    def _note_step_mark(self, mark):
        if self._reducer is not None and not self._released:
            self._reducer.note_step_mark(mark)

    def bucket_autotune(self):
        """What the bucket autotune measured and chose (gradcomm.Reducer.bucket_autotune;
        state "measuring" until the 4th synced step)."""
        if self._reducer is None:
            raise InvalidStateError("gcommInvalidState", "no reducer yet: with a membership it is built at "
                                    "start_step()" if self._membership is not None else "this wrapper was closed")
        return self._reducer.bucket_autotune()

    def straggler_report(self):
        """Which rank the others waited for in the last window of synced steps, by
        how much and in which phase (gradcomm.Reducer.straggler_report; the
        wrapper marks each forward's start and each optimizer step's end, so a
        late rank's time is split into optimizer, data loading, compute and link;
        docs/observability.md). Rank 0 also logs a WARN line when it changes."""
        if self._reducer is None:
            raise InvalidStateError("gcommInvalidState", "no reducer yet: with a membership it is built at "
                                    "start_step()" if self._membership is not None else "this wrapper was closed")
        return self._reducer.straggler_report()

    def nonfinite_source(self):
        """Where the last window's Inf/NaN gradients came from, or None when no rank's
        own gradient was non-finite in it: {'rank', 'parameter' (its name), 'steps'
        (steps it was a source on), 'alone' (of which it was the only rank),
        'nonfinite_steps', 'first_step', 'last_step'}. Each rank checks its gradients
        as the reducer packs them, before the all-reduce, so a NaN from one rank's
        batch is told from an overflow on every rank (not with
        gradient_as_bucket_view; docs/observability.md)."""
        if self._reducer is None:
            raise InvalidStateError("gcommInvalidState", "no reducer: the wrapper was closed or, with a "
                                    "membership, no step has started")
        r = self._reducer.nonfinite_report()
        if r.source_rank < 0:
            return None
        return {"rank": r.source_rank, "parameter": self._names[r.source_grad], "steps": r.source_steps,
                "alone": r.alone_steps, "nonfinite_steps": r.nonfinite_steps, "first_step": r.first_step,
                "last_step": r.last_step}

    @_eager
    def _before_forward(self):
        # Straggler attribution's forward mark: before the buffers' broadcast, where
        # the ranks meet and a late one would be waited for (docs/observability.md).
        if self.training and torch.is_grad_enabled():
            self._note_step_mark("forward_start")
        if self._replaced:
            raise InvalidStateError("gcommInvalidState", "this wrapper was replaced by a newer wrapper over the same "
                                    "parameters (the module was wrapped again): it no longer reduces their "
                                    "gradients; use the new one")
        if self._released:
            raise InvalidStateError("gcommInvalidState", "this wrapper was closed")
        if self._param_signature() != self._signature:
            raise InvalidStateError("gcommInvalidState", "the module's parameters changed after it was wrapped "
                                    "(added, removed, replaced, reshaped or moved): wrap the module again")
        if self._step_open:
            raise InvalidStateError("gcommInvalidState", "forward while the previous backward pass has not finished "
                                    "its step")
        if self._membership is not None and torch.is_grad_enabled():
            if self._step is None:
                raise InvalidStateError("gcommInvalidState", "with a membership every training step opens with "
                                        "start_step() (and ends with commit())")
            if self._step_error is not None:
                return  # the step will not commit: no collective on a failed generation
            try:
                # Keyed on the job's step, the same on every member (a newcomer's own
                # count of forwards is not), once per step.
                index = self._step.index
                if self.divergence_check_every > 0 and index > 0 and index % self.divergence_check_every == 0 \
                        and self._checked_at != index:
                    self._checked_at = index
                    self._raise_if_diverged()
                if self.broadcast_buffers and self.comm.world_size > 1:
                    self._broadcast_buffers(0)
            except DivergenceError:
                raise
            except Error as e:
                self._fail_step(e)
            return
        if torch.is_grad_enabled() and self._join is None and self.divergence_check_every > 0:
            self._training_forwards += 1
            if self._training_forwards % self.divergence_check_every == 0:
                self._raise_if_diverged()
        if torch.is_grad_enabled():
            # Inside join() every such forward votes; the buffers then come from the
            # highest rank that still has inputs, as DDP's.
            root = self._join_vote(active=True)[2] if self._join is not None else 0
            if self.broadcast_buffers and self.comm.world_size > 1:
                self._broadcast_buffers(root)

    def _raise_if_diverged(self):
        """The periodic check: DivergenceError on every rank alike when ranks differ."""
        report = self.check_divergence()
        if not report.agreed:
            raise DivergenceError(report, self._steps)

    def check_divergence(self, buffers=False):
        """The divergence check over the wrapped parameters (and the module's
        buffers with buffers=True): every rank hashes them and the hashes are
        compared (Communicator.check_divergence). Collective: every rank calls it.
        Returns a gradcomm.Divergence naming the ranks off the majority and their
        first tensor by name; its cost is one read of every byte checked (XXH64 on
        the host, a kernel on a GPU) and an all-gather of 8 bytes a tensor."""
        tensors, names = list(self._params), list(self._names)
        if buffers:
            for n, b in self.module.named_buffers():
                tensors.append(b)
                names.append(n)
        with torch.no_grad():
            return self.comm.check_divergence([t.detach().contiguous() for t in tensors], names,
                                              stream=self._stream())

    def _broadcast_buffers(self, root=0):
        with torch.no_grad():
            for b in self.module.buffers():
                self._broadcast_tensor(b, root=root)

    def _make_hook(self, i):
        wrapper = weakref.ref(self)  # the parameters must not keep the wrapper alive

        def hook(p):
            w = wrapper()
            if w is not None:
                w._on_grad_ready(i, p)
        return hook

    def _on_grad_ready(self, i, p):
        if self._membership is not None:
            if self._step_error is not None or self._step is None:
                return  # a failed step (its vote says so), or a backward outside a step
            try:
                if not self._step_open:
                    self._begin_step()
                self._take_grad(i, p)
            except InvalidArgumentError:  # this rank's own mistake (a sparse gradient, ...), not a failure
                try:
                    self._abandon_step()
                except Error as e:
                    self._fail_step(e)
                raise
            except Error as e:
                self._fail_step(e)
            return
        if not self._step_open:
            self._begin_step()
        try:
            self._take_grad(i, p)
        except BaseException:
            self._abandon_step()
            raise

    def _abandon_step(self):
        """Completes a step that backward will not finish (an exception in a
        hook): the collectives still run, this rank sending zeros for the
        gradients it did not reach, so no rank hangs and the wrapper stays usable."""
        if not self._step_open:
            return
        self._step_open = False
        try:
            self._reducer.finalize(self._stream())
        except InvalidStateError:
            pass  # the unused-gradient report: the step is not applied anyway

    def _take_grad(self, i, p):
        g = p.grad
        slot = self._slots[i]
        if g.layout != torch.strided:
            raise InvalidArgumentError("gcommInvalidArgument", f"parameter '{self._names[i]}' has a {g.layout} "
                                       "gradient: gradcomm reduces dense gradients only (e.g. "
                                       "nn.Embedding(sparse=False))")
        if g.data_ptr() != slot.data_ptr() or g.stride() != slot.stride() or g.shape != slot.shape:
            if g.shape != slot.shape or g.device != slot.device:
                raise InvalidArgumentError("gcommInvalidArgument", f"parameter '{self._names[i]}' got a gradient "
                                           f"of shape {tuple(g.shape)} on {g.device}; the parameter is "
                                           f"{tuple(slot.shape)} on {slot.device}")
            slot.copy_(g)  # casts, and makes a non-contiguous gradient contiguous
            p.grad = slot
        self._reducer.mark_ready(i, self._stream(), data=slot.data_ptr())
        self._marked[i] = True

    def _begin_step(self):
        self._reducer.begin_step(sync=self.require_backward_grad_sync)
        self._step_open = True
        self._marked = [False] * len(self._params)
        torch.autograd.Variable._execution_engine.queue_callback(self._finalize)

    def _finalize(self):
        if not self._step_open:  # abandoned by a failed hook
            return
        self._step_open = False
        sync = self.require_backward_grad_sync
        try:
            self._reducer.finalize(self._stream())
        except Error as e:
            missing = [n for n, m in zip(self._names, self._marked) if not m]
            if isinstance(e, InvalidStateError) and sync and missing:
                raise UnusedParametersError(missing, e.message) from None
            if self._membership is not None:  # a member failed: the vote discards the step
                self._fail_step(e)
                return
            raise
        finally:
            if sync:
                if self._membership is None:  # with one, commit() counts the steps that committed
                    self._steps += 1
                for p, slot, marked in zip(self._params, self._slots, self._marked):
                    if not marked:  # it received the others' average
                        p.grad = slot
        join = self._join
        if sync and join is not None and not join["divide_by_initial_world_size"] and \
                join["active"] < self.comm.world_size:
            with torch.no_grad():  # the average over the ranks that still had inputs
                for p in self._params:
                    if p.grad is not None:
                        p.grad.mul_(self.comm.world_size / join["active"])

    # ---- uneven inputs ------------------------------------------------------------------

    @contextlib.contextmanager
    def join(self, divide_by_initial_world_size=True, enable=True, throw_on_early_termination=False):
        """For ranks with different numbers of batches, as torch's DDP.join(): wrap
        the training loop; a rank that runs out of inputs takes part in the others'
        remaining steps with zero gradients until every rank has. The average is
        over all ranks (divide_by_initial_world_size=True, DDP's default) or over
        those that still had inputs (False). throw_on_early_termination=True makes
        every rank raise once one runs out instead. Each rank votes once per forward
        with grad enabled, so one forward per backward (as DDP requires here)."""
        if self._membership is not None:
            raise InvalidStateError("gcommInvalidState", "join() cannot be used with a membership: the live world "
                                    "changes between steps; draw each step's batches for its live world instead "
                                    "(docs/fault-tolerance.md, \"The divisor\")")
        if not enable or self.comm.world_size == 1:
            yield self
            return
        if self._join is not None:
            raise InvalidStateError("gcommInvalidState", "join() is already active on this model")
        self._join = {"divide_by_initial_world_size": divide_by_initial_world_size,
                      "throw": throw_on_early_termination, "active": self.comm.world_size, "steps": 0}
        try:
            yield self
            # This rank ran out of inputs: shadow the others until none has any: each
            # forward's buffer broadcast (syncing or not), and each synced backward.
            while True:
                active, syncing, root = self._join_vote(active=False)
                if active == 0:
                    break
                if self.broadcast_buffers:
                    self._broadcast_buffers(root)
                if syncing:
                    self._shadow_step()
            self._sync_final_model()
        finally:
            self._join = None

    def _sync_final_model(self):
        """As DDP's join: every rank ends with the parameters and buffers of a rank
        that ran the most steps (the highest such rank, as DDP picks), whose
        optimizer stepped last."""
        most = torch.tensor([float(self._join["steps"])], device=self.device)
        self.comm.all_reduce(most, op="max", stream=self._stream())
        mine = self.comm.rank if float(self._join["steps"]) == most.item() else -1
        best = torch.tensor([float(mine)], device=self.device)
        self.comm.all_reduce(best, op="max", stream=self._stream())
        root = int(best.item())
        with torch.no_grad():
            for t in list(self.module.parameters()) + list(self.module.buffers()):
                self._broadcast_tensor(t, root=root)

    def _join_vote(self, active):
        """One all-reduce per forward inside join(): which ranks still have inputs
        and how many of them sync this backward. Returns (ranks with inputs, of them
        syncing, the highest of them: the buffers' root). Under
        throw_on_early_termination every rank raises once one has none."""
        n = self.comm.world_size
        sync = active and self.require_backward_grad_sync
        self._join["steps"] += 1 if active else 0
        vote = torch.zeros(n + 1, device=self.device)
        vote[0] = 1.0 if sync else 0.0
        vote[1 + self.comm.rank] = 1.0 if active else 0.0
        self.comm.all_reduce(vote, op="sum", stream=self._stream())
        votes = vote.tolist()  # one copy to the host
        with_inputs = [r for r in range(n) if votes[1 + r] > 0]
        self._join["active"] = len(with_inputs)
        if self._join["throw"] and len(with_inputs) < n:
            raise JoinedRankError(n - len(with_inputs), n)
        return len(with_inputs), int(votes[0]), (with_inputs[-1] if with_inputs else 0)

    def _shadow_step(self):
        """A synced backward of the ranks that still have inputs, with zero
        gradients: the reducer's collectives with nothing marked."""
        self._reducer.begin_step(sync=True)
        try:
            self._reducer.finalize(self._stream())
        except InvalidStateError:
            pass  # the unused-gradient report: this rank contributed zeros on purpose
        self._steps += 1

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside accumulate locally; the next synced step reduces the sum."""
        if self._membership is not None:
            raise InvalidStateError("gcommInvalidState", "no_sync() with a membership is not built yet: each step "
                                    "between start_step() and commit() is one synced backward pass")
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    # ---- state, statistics, cleanup ----------------------------------------------------

    def comm_state_dict(self):
        """gradcomm's own state for a checkpoint: the compression's (step counter,
        error feedback, PowerSGD's Q). The GradScaler has its own state_dict()."""
        state = {"synced_steps": self._steps}
        if self._compression is not None:
            state["compression"] = {"kind": self._reducer.compression(), "state": self._reducer.compression_state()}
        return state

    def load_comm_state_dict(self, state):
        if self._step_open:
            raise InvalidStateError("gcommInvalidState", "load_comm_state_dict during a step")
        saved = state.get("compression")
        for old, kind in (("powersgd", "powersgd"), ("quantize", "int8")):  # checkpoints from before compression=
            if old in state:
                saved = {"kind": kind, "state": state[old]}
        mine = self._reducer.compression()
        theirs = saved["kind"] if saved is not None else "none"
        if mine != theirs:
            raise InvalidArgumentError("gcommInvalidArgument", f"the state was saved with compression {theirs}, "
                                       f"this model uses {mine}")
        if saved is not None:
            self._reducer.load_compression_state(saved["state"])
        self._steps = int(state.get("synced_steps", self._steps))

    @property
    def reducer(self):
        """The low-level gradcomm.Reducer (stats(), describe(), compression_stats(),
        step_timing())."""
        return self._reducer

    def grad_norm(self):
        """The global L2 norm of the last synced step's averaged gradients (a 0-dim tensor)."""
        return self._device_scalar(self._reducer.grad_norm(self._stream()))

    def clip_grad_norm_(self, max_norm):
        """torch.nn.utils.clip_grad_norm_ over the averaged gradients, without a host sync."""
        if not math.isfinite(max_norm) or max_norm <= 0:
            raise InvalidArgumentError("gcommInvalidArgument", f"max_norm must be positive and finite, not {max_norm}")
        return self._device_scalar(self._reducer.clip_grad_norm(max_norm, self._stream()))

    def _device_scalar(self, address):
        view = _C.tensor_view(address, [], int(_C.DataType.Float32), int(self.comm.device.kind),
                              max(self.comm.device.ordinal, 0), self._reducer, "torch")
        return view.clone()

    def close(self):
        """Releases the reducer (and the communicator if the wrapper created it).
        Not needed before dropping or re-wrapping (both release it too); closing
        a replaced or closed wrapper does nothing."""
        with _open_wrappers_lock:
            _open_wrappers.discard(self)
        if self._released:
            return
        if self._options["grad_as_bucket_view"]:
            for p, slot in zip(self._params, self._slots):  # the views die with the reducer's buckets
                if p.grad is not None and p.grad.data_ptr() == slot.data_ptr():
                    p.grad = p.grad.clone()
        self._release(now=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
