"""PyTorch Lightning, as it is installed: ``lightning`` (2.0 on) or the older
``pytorch_lightning`` package (gradcomm.lightning's strategies import it here)."""
try:
    import lightning.pytorch as pl
    from lightning.pytorch.strategies import DDPStrategy, SingleDeviceStrategy, StrategyRegistry
    from lightning.pytorch.utilities import rank_zero
except ImportError:  # the package Lightning was published as before 2.0
    try:
        import pytorch_lightning as pl
        from pytorch_lightning.strategies import DDPStrategy, SingleDeviceStrategy, StrategyRegistry
        from pytorch_lightning.utilities import rank_zero
    except ImportError as e:
        raise ImportError("gradcomm.lightning needs PyTorch Lightning: pip install lightning "
                          "(or pip install ./python[lightning])") from e

__all__ = ["pl", "DDPStrategy", "SingleDeviceStrategy", "StrategyRegistry", "rank_zero"]
