"""precision="16-mixed" in gradcomm's Lightning strategies: Lightning's GradScaler
becomes gradcomm's, which unscales and checks the gradients inside the reduction
(same settings, same calls: scale, unscale_, step, update, state_dict)."""
from .torch import GradScaler


def fuse_grad_scaler(strategy):
    """Replaces the precision plugin's torch GradScaler with gradcomm's on
    strategy.model (a gradcomm.torch.DistributedDataParallel); nothing without one."""
    scaler = getattr(strategy.precision_plugin, "scaler", None)
    if scaler is None or not scaler.is_enabled():
        return
    # (A gradcomm scaler of an earlier fit is bound to that fit's wrapper: made again,
    # from its current scale.)
    strategy.precision_plugin.scaler = GradScaler(
        strategy.model, init_scale=scaler.get_scale(), growth_factor=scaler.get_growth_factor(),
        backoff_factor=scaler.get_backoff_factor(), growth_interval=scaler.get_growth_interval())
