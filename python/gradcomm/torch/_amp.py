"""gradcomm.torch.GradScaler: torch.amp.GradScaler's interface, fused into the reducer.

torch's GradScaler unscales the gradients in their own pass (unscale_ or step)
and checks them for Inf/NaN in another. Here the reducer's epilogue, which
already writes every averaged gradient once, multiplies by 1/scale and sets the
Inf/NaN flag in the same pass, and finalize (at the end of backward) applies the
scale rule on the device. What is left for step() is one read of the "skip"
flag (torch's step reads found_inf too).

Differences from torch.amp.GradScaler, all following from the fusion:
  - the gradients are already unscaled when backward returns, so unscale_() only
    checks the call order, and clipping between unscale_() and step() works as
    with torch (use model.clip_grad_norm_ for a clip without a host sync);
  - the new scale is computed at the end of backward, so get_scale() read
    between backward and update() already returns it;
  - update(new_scale) sets the scale (and resets the growth tracker) as torch does.
"""
import torch

from ..errors import InvalidArgumentError, InvalidStateError
from ..scaler import GradScaler as _NativeScaler
from .. import _gradcomm as _C


class GradScaler:
    """Dynamic loss scaling for a gradcomm.torch.DistributedDataParallel ``model``.

    Create it before the first backward pass: ``scaler = GradScaler(model)``.
    The rest is torch's: ``scaler.scale(loss).backward(); scaler.step(opt);
    scaler.update()``. Arguments and defaults are torch.amp.GradScaler's, plus
    DeepSpeed-style ``hysteresis`` and a ``min_scale`` floor.
    """

    def __init__(self, model, init_scale=65536.0, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True, hysteresis=1, min_scale=0.0):
        self._model = model
        self._enabled = bool(enabled)
        self._config = dict(init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff_factor,
                            growth_interval=growth_interval, hysteresis=hysteresis, min_scale=min_scale)
        self._native = None
        self._stepped = set()    # optimizers stepped since the last update()
        self._unscaled = set()   # optimizers unscale_()d since the last update()
        if not self._enabled:
            return
        model._check_scaler_can_attach()
        device = model._scaler_device()
        self._native = _NativeScaler(device, **self._config)
        scale_addr, _, _, skipped_addr = self._native.device_state()
        kind, ordinal = int(device.kind), max(device.ordinal, 0)
        self._scale = _C.tensor_view(scale_addr, [], int(_C.DataType.Float32), kind, ordinal, self._native, "torch")
        self._skipped = _C.tensor_view(skipped_addr, [], 100, kind, ordinal, self._native, "torch")
        model._attach_scaler(self)

    def is_enabled(self):
        return self._enabled

    def scale(self, outputs):
        """``outputs`` (a tensor, or nested lists/tuples of them) times the loss scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, torch.Tensor):
            return outputs * self._scale.to(device=outputs.device, non_blocking=True)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise InvalidArgumentError("gcommInvalidArgument", f"scale() takes tensors, not {type(outputs).__name__}")

    def unscale_(self, optimizer):
        """The gradients were unscaled by the reducer; this only checks the order."""
        if not self._enabled:
            return
        if id(optimizer) in self._stepped:
            raise RuntimeError("unscale_() is being called after step().")
        if id(optimizer) in self._unscaled:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        self._unscaled.add(id(optimizer))

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step(*args, **kwargs) unless this step saw Inf/NaN; returns its result or None."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        if id(optimizer) in self._stepped:
            raise RuntimeError("step() has already been called since the last update().")
        self._unscaled.add(id(optimizer))
        self._stepped.add(id(optimizer))
        if self.found_inf():
            return None
        return optimizer.step(*args, **kwargs)

    def found_inf(self):
        """Whether the last synced step saw Inf/NaN and is skipped (reads one flag: a host sync)."""
        return bool(self._skipped.item()) if self._enabled else False

    def update(self, new_scale=None):
        """Ends the iteration. The scale rule already ran at the end of backward;
        ``new_scale`` (a float or a 1-element tensor) replaces the scale."""
        if not self._enabled:
            return
        self._stepped.clear()
        self._unscaled.clear()
        if new_scale is not None:
            value = float(new_scale.item() if isinstance(new_scale, torch.Tensor) else new_scale)
            state = self._native.state(self._model._stream())
            state.scale, state.growth_tracker = value, 0
            self._native.set_state(state, self._model._stream())

    def get_scale(self):
        return float(self._scale.item()) if self._enabled else 1.0

    def get_growth_factor(self):
        return self._config["growth_factor"]

    def get_backoff_factor(self):
        return self._config["backoff_factor"]

    def get_growth_interval(self):
        return self._config["growth_interval"]

    def _get_growth_tracker(self):
        return self._native.state(self._model._stream()).growth_tracker if self._enabled else 0

    def state_dict(self):
        """torch.amp.GradScaler's keys (loadable by either), plus hysteresis."""
        if not self._enabled:
            return {}
        s = self._native.state(self._model._stream())
        return {"scale": s.scale, "growth_factor": self._config["growth_factor"],
                "backoff_factor": self._config["backoff_factor"],
                "growth_interval": self._config["growth_interval"], "_growth_tracker": s.growth_tracker,
                "_hysteresis_left": s.hysteresis_left}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        if self._model._step_open:
            raise InvalidStateError("gcommInvalidState", "load_state_dict during a step")
        for key in ("growth_factor", "backoff_factor", "growth_interval"):
            if key in state_dict and state_dict[key] != self._config[key]:
                raise InvalidArgumentError("gcommInvalidArgument", f"the state has {key} {state_dict[key]}, this "
                                           f"scaler {self._config[key]}: create the scaler with the saved values")
        s = self._native.state(self._model._stream())
        s.scale = float(state_dict["scale"])
        s.growth_tracker = int(state_dict.get("_growth_tracker", 0))
        s.hysteresis_left = int(state_dict.get("_hysteresis_left", self._config["hysteresis"]))
        s.skipped_last = 0
        self._native.set_state(s, self._model._stream())
