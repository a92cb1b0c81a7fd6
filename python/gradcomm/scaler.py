"""The dynamic loss scale, kept on the device and updated without host syncs."""
from . import _gradcomm as _C
from ._buffers import parse_device
from ._handle import Handle


class GradScaler(Handle):
    """Low-level grad scaler (torch.amp.GradScaler's rule; PyTorch users want
    gradcomm.torch.GradScaler, which fuses it into the reducer)."""

    _kind = "grad scaler"

    def __init__(self, device="cpu", *, init_scale=65536.0, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, hysteresis=1, min_scale=0.0):
        c = _C.GradScalerConfig()
        c.init_scale, c.growth_factor, c.backoff_factor = float(init_scale), float(growth_factor), float(backoff_factor)
        c.growth_interval, c.hysteresis, c.min_scale = int(growth_interval), int(hysteresis), float(min_scale)
        self.device = parse_device(device)
        self.config = c
        self._own(_C.scaler_create(self.device, c), _C.scaler_destroy)

    def update(self, stream=0):
        _C.scaler_update(self.handle, stream)

    def device_state(self):
        """Addresses of (scale, 1/scale, found_inf, skipped_last) on the device."""
        return _C.scaler_device_state(self.handle)

    def state(self, stream=0):
        """GradScalerState (scale, growth_tracker, hysteresis_left, skipped_last); syncs."""
        return _C.scaler_get_state(self.handle, stream)

    def set_state(self, state, stream=0):
        _C.scaler_set_state(self.handle, state, stream)
