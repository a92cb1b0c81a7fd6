"""Buffers the low-level API accepts: torch tensors and numpy arrays, described as
(address, element count, gcommDataType_t, device) after the checks the C API
cannot make (dtype, contiguity, sparsity, device)."""
from . import _gradcomm as _C
from .errors import InvalidArgumentError

_TORCH_DTYPES = {"torch.float32": _C.DataType.Float32, "torch.float16": _C.DataType.Float16,
                 "torch.bfloat16": _C.DataType.Bfloat16}
_NUMPY_DTYPES = {"float32": _C.DataType.Float32, "float16": _C.DataType.Float16}


def _bad(message):
    return InvalidArgumentError("gcommInvalidArgument", message)


def torch_device(x, what):
    """The Device of a dense, contiguous torch tensor on the CPU or a GPU."""
    if not x.is_contiguous():
        raise _bad(f"{what} is not contiguous (strides {tuple(x.stride())}): call .contiguous() first")
    dev = _C.Device()
    if x.device.type == "cuda":
        dev.kind, dev.ordinal = _C.DeviceKind.Cuda, x.device.index
    elif x.device.type != "cpu":
        raise _bad(f"{what} is on {x.device}: gradcomm takes cpu or cuda tensors")
    return dev


def describe(x, what="buffer"):
    """(address, count, dtype, Device) of a torch tensor or numpy array."""
    if hasattr(x, "data_ptr") and hasattr(x, "is_sparse"):  # torch.Tensor
        if x.is_sparse or getattr(x, "layout", None) is not None and str(x.layout) != "torch.strided":
            raise _bad(f"{what} is a sparse tensor ({x.layout}): gradcomm takes dense tensors")
        dtype = _TORCH_DTYPES.get(str(x.dtype))
        if dtype is None:
            raise _bad(f"{what} has dtype {x.dtype}: gradcomm takes float32, float16 or bfloat16")
        return x.data_ptr(), x.numel(), dtype, torch_device(x, what)
    if hasattr(x, "__array_interface__"):  # numpy
        dtype = _NUMPY_DTYPES.get(str(x.dtype))
        if dtype is None:
            raise _bad(f"{what} has dtype {x.dtype}: gradcomm takes float32 or float16 arrays")
        if not x.flags["C_CONTIGUOUS"]:
            raise _bad(f"{what} is not C-contiguous")
        return x.__array_interface__["data"][0], x.size, dtype, _C.Device()
    raise _bad(f"{what} must be a torch.Tensor or a numpy array, not {type(x).__name__}")


def same_device(a, b):
    return a.kind == b.kind and (a.kind == _C.DeviceKind.Host or a.ordinal == b.ordinal)


def device_name(d):
    return "cpu" if d.kind == _C.DeviceKind.Host else f"cuda:{d.ordinal}"


def parse_device(device):
    """A Device from "cpu", "cuda", "cuda:N", a torch.device, or a Device."""
    if isinstance(device, _C.Device):
        return device
    d = _C.Device()
    text = str(device) if device is not None else "cpu"
    if text in ("cpu", "host"):
        return d
    if text == "cuda":
        d.kind, d.ordinal = _C.DeviceKind.Cuda, -1  # from the local rank
        return d
    if text.startswith("cuda:") and text[5:].isdigit():
        d.kind, d.ordinal = _C.DeviceKind.Cuda, int(text[5:])
        return d
    raise _bad(f"device {device!r}: expected 'cpu', 'cuda' or 'cuda:N'")
