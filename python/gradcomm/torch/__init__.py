"""gradcomm for PyTorch: DistributedDataParallel and GradScaler on gradcomm's reducer.

    import gradcomm.torch as gct
    model = gct.DistributedDataParallel(model)            # instead of torch's DDP
    scaler = gct.GradScaler(model)                        # instead of torch.amp.GradScaler()
    outer = gct.OuterSync(model, comm, sync_every=100)    # or: local steps, synced every 100 (DiLoCo)

The migration guide, with the table of DDP options, is docs/pytorch.md.
"""
from ._amp import GradScaler
from ._ddp import DistributedDataParallel, JoinedRankError, UnusedParametersError
from ._outer_sync import OuterSync

__all__ = ["DistributedDataParallel", "GradScaler", "JoinedRankError", "OuterSync", "UnusedParametersError"]
