"""Training through failures in Lightning: ``Trainer(strategy=FaultTolerantStrategy(...))``
(docs/fault-tolerance.md, "Lightning").

torch.distributed's world is fixed at start and a lost rank ends it, so a
fault-tolerant job cannot run Lightning's own collectives: each member process
runs a Trainer of its own (one device, Lightning's single-device strategy), and
gradcomm joins the members. The module is wrapped in
``gradcomm.torch.DistributedDataParallel(membership=...)``; every training step
opens with the wrapper's start_step() (a newcomer receives the parameters,
buffers, the optimizer's, the LR scheduler's and the compression's state) and
the optimizer steps only when the membership commits the step on every member.
Lightning's global_step follows the job's committed steps, so every member stops
at the same step. Lightning's barriers, broadcasts and ``sync_dist`` are the
member's own (nothing crosses processes); the live rank 0 is the global zero
(checkpoints, loggers).
"""
import inspect

from ._lightning_import import SingleDeviceStrategy, rank_zero
from ._lightning_scaler import fuse_grad_scaler
from ._lightning_stragglers import StragglerLog
from .errors import InvalidArgumentError, InvalidStateError
from .membership import Membership
from .torch import DistributedDataParallel
from .torch._ddp import check_options

# The wrapper's options the strategy passes on (the membership is the strategy's;
# timeout is the membership's).
_WRAPPER_OPTIONS = [name for name in inspect.signature(DistributedDataParallel.__init__).parameters
                    if name not in ("self", "module", "comm", "membership", "timeout")]


class FaultTolerantStrategy(SingleDeviceStrategy):
    """One member of a fault-tolerant job. store ("host:port", else
    GRADCOMM_STORE), job_key, min_ranks, quorum_timeout, timeout and name are
    gradcomm.Membership's; device is this member's ("cpu", "cuda:0"); the other
    keyword arguments are gradcomm.torch.DistributedDataParallel's (compression,
    wire_dtype, bucket_cap_mb, ...). Bad ones are refused here, when the Trainer is
    built. One optimizer; gradient accumulation is not supported with it yet.
    precision="16-mixed" runs on gradcomm's GradScaler, as with GradcommStrategy."""

    strategy_name = "gradcomm_fault_tolerant"

    def __init__(self, store=None, job_key=None, min_ranks=1, quorum_timeout=None, timeout=None, name=None,
                 device="cpu", accelerator=None, checkpoint_io=None, precision_plugin=None, **options):
        unknown = sorted(set(options) - set(_WRAPPER_OPTIONS))
        if unknown:
            raise InvalidArgumentError("gcommInvalidArgument", f"FaultTolerantStrategy got {', '.join(unknown)}: "
                                       "its options are gradcomm.Membership's (store, job_key, min_ranks, "
                                       "quorum_timeout, timeout, name), device, and "
                                       f"gradcomm.torch.DistributedDataParallel's: {', '.join(_WRAPPER_OPTIONS)}")
        if options.get("gradient_as_bucket_view"):
            raise InvalidArgumentError("gcommInvalidArgument", "gradient_as_bucket_view cannot be used with a "
                                       "membership (docs/fault-tolerance.md)")
        check_options(timeout=timeout, **options)
        if isinstance(min_ranks, bool) or not isinstance(min_ranks, int) or min_ranks < 1:
            raise InvalidArgumentError("gcommInvalidArgument", f"min_ranks must be a whole number >= 1, not "
                                       f"{min_ranks!r}")
        super().__init__(device=device, accelerator=accelerator, checkpoint_io=checkpoint_io,
                         precision_plugin=precision_plugin)
        self._membership_options = dict(store=store, job_key=job_key, name=name, min_ranks=min_ranks,
                                        quorum_timeout=quorum_timeout, timeout=timeout)
        self._wrapper_options = options
        self._membership = None
        self._rank = 0  # in the live world: rank 0 is the global zero
        self.step = None  # the last training step's gradcomm.torch Step (rank, world_size, ...)
        self.stats = None  # the membership's counters when fit ended
        self._committed = 0
        self._stragglers = StragglerLog()

    # ---- the member and its wrapper -------------------------------------------------------

    def setup(self, trainer):
        super().setup(trainer)
        fitting = trainer.state.fn == "fit"
        if not fitting:
            return
        if len(self.optimizers) != 1:
            raise InvalidArgumentError("gcommInvalidArgument", f"FaultTolerantStrategy takes one optimizer, "
                                       f"not {len(self.optimizers)}")
        if trainer.accumulate_grad_batches != 1:
            raise InvalidArgumentError("gcommInvalidArgument", "FaultTolerantStrategy does not accumulate "
                                       "gradients yet: every training step is a voted step; use "
                                       "accumulate_grad_batches=1")
        device = "cpu" if self.root_device.type == "cpu" else f"cuda:{self.root_device.index or 0}"
        self._membership = Membership(device=device, **self._membership_options)
        self.model = DistributedDataParallel(self.model, membership=self._membership, **self._wrapper_options)
        fuse_grad_scaler(self)  # precision="16-mixed": newcomers receive its state, a discarded step keeps none

    def _wrapped(self):
        return self.model if isinstance(self.model, DistributedDataParallel) else None

    @property
    def is_global_zero(self):
        return self._rank == 0

    @property
    def committed_steps(self):
        """The job's committed steps (Lightning's global_step follows them)."""
        model = self._wrapped()
        return model.committed_steps if model is not None else self._committed

    def training_step(self, *args, **kwargs):
        model = self._wrapped()
        if model is not None and model._step is None:
            schedulers = [c.scheduler for c in self.lr_scheduler_configs]
            step = model.start_step(self.optimizers[0], schedulers[0] if len(schedulers) == 1 else None)
            self.step = step
            self._rank = step.rank
            rank_zero.rank_zero_only.rank = step.rank
            self._count_global_steps(step.index)
        return super().training_step(*args, **kwargs)

    def optimizer_step(self, optimizer, closure, model=None, **kwargs):
        wrapped = self._wrapped()
        if wrapped is None:
            return super().optimizer_step(optimizer, closure, model, **kwargs)
        result = closure()  # training_step (start_step, forward) and backward (the reduction)
        if result is None:  # no backward: this member reduced nothing, so the step cannot commit
            error = InvalidStateError("gcommInvalidState", "the training step returned no loss: every member of a "
                                      "fault-tolerant job must take part in every step's backward")
            wrapped._fail_step(error)
            wrapped.commit()
            raise error
        if wrapped.commit():
            stepped = super().optimizer_step(optimizer, lambda: result, model, **kwargs)
            self._stragglers.after_step(wrapped, self.is_global_zero)
            return stepped
        # Discarded on every member: the optimizer does not step, and Lightning's loop,
        # which counts the step after this returns, does not count it.
        self._count_global_steps(wrapped.committed_steps - 1)
        return result

    def _count_global_steps(self, n):
        """Lightning's global_step is the count of completed optimizer steps: set to
        the job's, so a newcomer and the survivors of a discarded step agree."""
        trainer = self.lightning_module.trainer
        total = trainer.fit_loop.epoch_loop.automatic_optimization.optim_progress.optimizer.step.total
        total.completed = n
        total.ready = max(total.ready, n)

    def teardown(self):
        model = self._wrapped()
        try:
            if model is not None:
                self._committed = model.committed_steps
                self.model = self.lightning_module
                model.close()
        finally:
            if self._membership is not None:
                self.stats = self._membership.stats
                self._membership.close()
                self._membership = None
            super().teardown()

    @classmethod
    def register_strategies(cls, strategy_registry):
        strategy_registry.register(cls.strategy_name, cls, description="gradcomm: train through failures, one "
                                   "Trainer per member process", override=True)
