"""The caller's current CUDA stream, read through torch when it is loaded."""
import sys


def current_stream(ordinal):
    torch = sys.modules.get("torch")
    if torch is None:
        return 0
    return torch.cuda.current_stream(ordinal).cuda_stream
