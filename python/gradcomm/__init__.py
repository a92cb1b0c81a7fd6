"""gradcomm: gradient communication for PyTorch and other frameworks.

PyTorch users start with ``gradcomm.torch`` (DistributedDataParallel, GradScaler).
This module is the low-level API over the C library: communicators, the reducer,
the grad scaler and the allocator, with errors raised as gradcomm.Error subclasses.
"""
try:
    from . import _gradcomm as _C  # noqa: E402
except ImportError as e:  # the source tree (python/gradcomm) has no compiled extension
    raise ImportError(f"gradcomm's compiled extension was not found next to {__file__}: install the package "
                      "(pip install ./python) and import it from outside the python/ folder of a checkout") from e
from .errors import (AbortedError, CudaError, DivergenceError, Error, InternalError, InvalidArgumentError,
                     InvalidStateError, NcclError, NotSupportedError, OutOfMemoryError, RemoteError, TimeoutError)
from . import errors as _errors

_C._set_error_factory(_errors.from_status)

from .allocator import Allocator  # noqa: E402
from .comm import Communicator, Divergence, group, init, init_from_env, init_local, launcher_rank  # noqa: E402
from .membership import Membership, StoreServer, View  # noqa: E402
from .reducer import Reducer  # noqa: E402
from .scaler import GradScaler  # noqa: E402

DataType = _C.DataType
__version__ = _C.version_string()


def cuda_device_count():
    """Usable GPUs (0 on a machine without a GPU or driver; not an error)."""
    return _C.cuda_device_count()


def environment_report():
    """gradcomm, CUDA and NCCL versions and the GPUs seen, as text."""
    return _C.environment_report()


def environment():
    """The same facts as a dict (gradcomm-info --json): versions, NCCL's path or why it is missing, GPUs."""
    import json
    return json.loads(_C.environment_json())


def nccl_version():
    """(built, loaded) NCCL version codes. Loads NCCL (docs/install.md says from where);
    raises NotSupportedError, listing every place searched, when it cannot be found."""
    return _C.nccl_version()


__all__ = ["AbortedError", "Allocator", "Communicator", "CudaError", "DataType", "Divergence", "DivergenceError",
           "Error", "GradScaler",
           "InternalError", "InvalidArgumentError", "InvalidStateError", "NcclError", "NotSupportedError",
           "OutOfMemoryError", "Reducer", "RemoteError", "TimeoutError", "cuda_device_count",
           "environment", "environment_report", "group", "init", "init_from_env", "init_local", "launcher_rank", "nccl_version"]
