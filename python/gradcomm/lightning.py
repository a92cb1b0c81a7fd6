"""gradcomm for PyTorch Lightning: ``Trainer(strategy="gradcomm")`` after
``import gradcomm.lightning``, or ``Trainer(strategy=GradcommStrategy(...))``.

The strategy is Lightning's own DDP strategy (its launchers, samplers, cluster
environments, barriers and logging) with the gradients reduced by gradcomm instead
of torch's DistributedDataParallel: the module is wrapped in
``gradcomm.torch.DistributedDataParallel`` and every wrapper option is a strategy
option. Lightning's own collectives (barriers, broadcasting objects, logging with
``sync_dist``) stay on torch.distributed; gradcomm's store listens on Lightning's
port + 1 (``GRADCOMM_MASTER_PORT`` chooses another). Needs ``lightning`` (or
``pytorch_lightning``): ``pip install ./python[lightning]``.
"""
import atexit
import inspect
import os

import torch

from ._lightning_import import DDPStrategy, StrategyRegistry, pl  # noqa: F401 - pl for users of this module

from . import comm as _comm
from .errors import InvalidArgumentError
from ._lightning_scaler import fuse_grad_scaler
from .torch import DistributedDataParallel, OuterSync
from .torch._outer_sync import check_outer_sync_options
from .torch._ddp import check_options
from ._lightning_stragglers import StragglerLog

# The wrapper's options, as the strategy takes them (module and comm are the strategy's;
# a membership is FaultTolerantStrategy's).
_WRAPPER_OPTIONS = [name for name in inspect.signature(DistributedDataParallel.__init__).parameters
                    if name not in ("self", "module", "comm", "membership")]


def _check_outer_sync(outer_sync, options):
    """outer_sync: None or a dict of gradcomm.torch.OuterSync's arguments, alone."""
    if outer_sync is None:
        return
    if not isinstance(outer_sync, dict):
        raise InvalidArgumentError("gcommInvalidArgument", f"outer_sync must be a dict of gradcomm.torch.OuterSync's "
                                   f"arguments (sync_every=..., ...), not {type(outer_sync).__name__}")
    known = [n for n in inspect.signature(OuterSync.__init__).parameters if n not in ("self", "params", "comm")]
    unknown = sorted(set(outer_sync) - set(known))
    if unknown:
        raise InvalidArgumentError("gcommInvalidArgument", f"outer_sync got {', '.join(unknown)}: its keys are "
                                   f"gradcomm.torch.OuterSync's: {', '.join(known)}")
    args = dict(inspect.signature(OuterSync.__init__).parameters)
    values = {n: outer_sync.get(n, args[n].default) for n in known}
    check_outer_sync_options(**values)  # the values too, here, not inside fit
    wrapper = sorted(set(options) - {"timeout"})
    if wrapper:
        raise InvalidArgumentError("gcommInvalidArgument", f"outer_sync replaces the per-step gradient reduction: "
                                   f"{', '.join(wrapper)} (DistributedDataParallel's) do not apply; give the "
                                   f"pseudo-gradients' wire as outer_sync's compression")


class GradcommStrategy(DDPStrategy):
    """Lightning's DDP strategy with gradcomm's gradient reduction. Keyword
    arguments are gradcomm.torch.DistributedDataParallel's (wire_dtype, powersgd,
    quantize, gradient_as_bucket_view, bucket_cap_mb, unused_parameters, ...); an
    unknown one, or a bad value, is refused here, when the Trainer is built.

    outer_sync=dict(sync_every=..., ...) trains with outer synchronization instead
    (DiLoCo, docs/outer-sync.md): no per-step gradient reduction, each rank steps on
    its own shard, and gradcomm.torch.OuterSync (the dict holds its arguments) syncs
    the parameters every sync_every optimizer steps. It takes no wrapper option."""

    strategy_name = "gradcomm"

    def __init__(self, accelerator=None, parallel_devices=None, cluster_environment=None, checkpoint_io=None,
                 precision_plugin=None, start_method="popen", outer_sync=None, **options):
        if "ranks_per_device" in options:
            raise InvalidArgumentError("gcommInvalidArgument", "ranks_per_device is not available yet: several "
                                       "processes per GPU need the cuda-ipc transport, which is correct on a GPU "
                                       "but still costs ~1.2 ms a call (docs/benchmarks.md); "
                                       "gradcomm.torch.DistributedDataParallel under torchrun can put them there "
                                       "meanwhile (docs/pytorch.md)")
        if "membership" in options:
            raise InvalidArgumentError("gcommInvalidArgument", "GradcommStrategy runs on torch.distributed's fixed "
                                       "world, which a lost rank ends: train through failures with "
                                       "gradcomm.lightning.FaultTolerantStrategy (strategy=\"gradcomm_fault_tolerant\"), "
                                       "one Trainer per member process (docs/fault-tolerance.md)")
        _check_outer_sync(outer_sync, options)
        unknown = sorted(set(options) - set(_WRAPPER_OPTIONS))
        if unknown:
            raise InvalidArgumentError("gcommInvalidArgument", f"GradcommStrategy got {', '.join(unknown)}: its "
                                       f"options are gradcomm.torch.DistributedDataParallel's: "
                                       f"{', '.join(_WRAPPER_OPTIONS)}")
        # Their values too, the compression's through gradcomm's own checks: a bad
        # one is refused here, not inside fit, where it surfaced masked by the
        # cleanup (issue 44 #9).
        check_options(**options)
        super().__init__(accelerator=accelerator, parallel_devices=parallel_devices,
                         cluster_environment=cluster_environment, checkpoint_io=checkpoint_io,
                         precision_plugin=precision_plugin, start_method=start_method)
        self._gradcomm_options = options
        self._gradcomm_outer_options = outer_sync
        self._gradcomm_outer = None  # the OuterSync, with outer_sync=
        self._gradcomm_comm = None
        self._gradcomm_restore = None  # a checkpoint's communication state, applied once wrapped
        self._gradcomm_last_state = None  # the wrapper's when it was closed (teardown)
        self._gradcomm_stragglers = StragglerLog()

    # ---- the communicator ---------------------------------------------------------------

    def setup_distributed(self):
        super().setup_distributed()  # torch.distributed, for Lightning's own collectives
        _close_torch_distributed_at_exit()
        env = self.cluster_environment
        port = os.environ.get("GRADCOMM_MASTER_PORT")
        port = int(port) if port else env.main_port + 1
        device = "cpu" if self.root_device.type == "cpu" else f"cuda:{self.root_device.index or 0}"
        self._gradcomm_comm = _comm.init(self.global_rank, self.world_size, master_addr=env.main_address,
                                         master_port=None if self.world_size == 1 else port, device=device,
                                         timeout=self._gradcomm_options.get("timeout"))

    # ---- the wrapper --------------------------------------------------------------------

    def _setup_model(self, model):
        if self._gradcomm_outer_options is not None:  # the module stays unwrapped: local inner steps
            self._gradcomm_outer = OuterSync(model, self._gradcomm_comm, **self._gradcomm_outer_options)
            return model
        return DistributedDataParallel(model, self._gradcomm_comm, **self._gradcomm_options)

    def configure_ddp(self):
        self.model = self._setup_model(self.model)
        if self._gradcomm_outer is None:
            fuse_grad_scaler(self)
        if self._gradcomm_restore is not None:
            self._load_comm_state(self._gradcomm_restore)
            self._gradcomm_restore = None

    def optimizer_step(self, optimizer, closure, model=None, **kwargs):
        result = super().optimizer_step(optimizer, closure, model, **kwargs)
        if self._gradcomm_outer is not None:
            self._gradcomm_outer.step()
        elif isinstance(self.model, DistributedDataParallel):
            self._gradcomm_stragglers.after_step(self.model, self.is_global_zero)
        return result

    def _register_ddp_hooks(self):
        pass  # torch's comm hooks: gradcomm's compression is a wrapper option

    def block_backward_sync(self):
        if isinstance(self.model, DistributedDataParallel):
            return self.model.no_sync()
        return super().block_backward_sync()

    def pre_backward(self, closure_loss):
        pass  # torch's DDP prepares its reducer here; gradcomm's hooks need nothing

    def post_backward(self, closure_loss):
        pass

    # ---- checkpoints: every rank's communication state (PowerSGD, int8 error feedback) ---

    def _comm_state(self):
        """This rank's state: the wrapper's, or what it held when fit ended (a
        checkpoint saved after fit, the common `trainer.save_checkpoint` call)."""
        if self._gradcomm_outer is not None:
            return self._gradcomm_outer.state_dict()
        if isinstance(self.model, DistributedDataParallel):
            return self.model.comm_state_dict()
        return self._gradcomm_last_state

    def _load_comm_state(self, state):
        outer = isinstance(state, dict) and "outer_sync" in state
        if (self._gradcomm_outer is not None) != outer:
            raise InvalidArgumentError(
                "gcommInvalidArgument", "the checkpoint's gradcomm state was saved "
                f"{'with' if outer else 'without'} outer_sync, this strategy runs "
                f"{'with' if self._gradcomm_outer is not None else 'without'} it: resume with the same strategy options")
        if self._gradcomm_outer is not None:
            self._gradcomm_outer.load_state_dict(state)
        else:
            self.model.load_comm_state_dict(state)

    def save_checkpoint(self, checkpoint, filepath, storage_options=None):
        # Every rank calls it (Lightning's Trainer.save_checkpoint); rank 0 writes.
        mine = self._comm_state()
        if mine is not None and torch.distributed.is_initialized():
            states = [None] * self.world_size if self.global_rank == 0 else None
            torch.distributed.gather_object(mine, states, dst=0)
            if self.global_rank == 0:
                checkpoint["gradcomm"] = {"world_size": self.world_size, "ranks": states}
        super().save_checkpoint(checkpoint, filepath, storage_options=storage_options)

    def load_checkpoint(self, checkpoint_path, *args, **kwargs):
        checkpoint = super().load_checkpoint(checkpoint_path, *args, **kwargs)
        saved = checkpoint.get("gradcomm")
        trainer = getattr(self.lightning_module, "_trainer", None) if self.lightning_module is not None else None
        fitting = trainer is not None and trainer.state.fn == "fit"
        if saved is not None and fitting:  # validate and test need no communication state
            if saved["world_size"] != self.world_size:
                raise InvalidArgumentError(
                    "gcommInvalidArgument", f"the checkpoint holds gradcomm's state of {saved['world_size']} ranks, "
                    f"this run has {self.world_size}: resume with the same number of processes")
            self._gradcomm_restore = saved["ranks"][self.global_rank]
            if self._gradcomm_outer is not None or isinstance(self.model, DistributedDataParallel):
                self._load_comm_state(self._gradcomm_restore)
                self._gradcomm_restore = None
        return checkpoint

    # ---- the end ------------------------------------------------------------------------

    def teardown(self):
        self._gradcomm_restore = None
        if self._gradcomm_outer is not None:
            self._gradcomm_last_state = self._gradcomm_outer.state_dict()
            self._gradcomm_outer.close()
            self._gradcomm_outer = None
        if isinstance(self.model, DistributedDataParallel):
            self._gradcomm_last_state = self.model.comm_state_dict()
            self.model.close()
            self.model = self.lightning_module
        if self._gradcomm_comm is not None:
            self._gradcomm_comm.close()
            self._gradcomm_comm = None
        super().teardown()

    @classmethod
    def register_strategies(cls, strategy_registry):
        strategy_registry.register("gradcomm", cls, description="gradcomm's gradient reduction in Lightning's DDP",
                                   override=True)


_closing_at_exit = False


def _close_torch_distributed_at_exit():
    """Lightning's DDP strategy leaves torch.distributed's group open when the Trainer
    is done (it may fit again). Left to the interpreter's exit, gloo's worker threads
    can still be releasing a tensor while Python finalizes, and the process aborts
    ("terminate called without an active exception", ProcessGroupGloo::runLoop): 3
    runs in 20 under torchrun on a 2-core machine, which torchrun reports as a failed
    job. The group is closed at exit instead, before Python finalizes."""
    global _closing_at_exit
    if not _closing_at_exit:
        atexit.register(_close_torch_distributed)
        _closing_at_exit = True


def _close_torch_distributed():
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


GradcommStrategy.register_strategies(StrategyRegistry)

from ._lightning_fault_tolerant import FaultTolerantStrategy  # noqa: E402 - after GradcommStrategy, which it names

FaultTolerantStrategy.register_strategies(StrategyRegistry)
