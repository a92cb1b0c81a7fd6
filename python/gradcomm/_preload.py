"""One process holds one libnccl.so.2. libgradcomm.so needs *an* NCCL 2.x (its
ABI is stable); PyTorch's wheel needs the newer one of the nvidia-nccl-cu*
package it depends on. If libgradcomm is loaded first, the loader resolves its
libnccl.so.2 to the system's (the CUDA toolkit's), and a later `import torch`
fails with "undefined symbol: ncclCommResume". So, before the extension loads,
the package's NCCL is loaded when it is installed: torch and gradcomm then share
it, whichever is imported first. (Issue 18's lazy dlopen of NCCL replaces this.)"""
import ctypes
import importlib.util
import os


def preload_pip_nccl():
    """Loads nvidia/nccl/lib/libnccl.so.2 globally if the package is installed; returns its path or None."""
    if os.environ.get("GRADCOMM_NO_NCCL_PRELOAD"):
        return None
    try:
        spec = importlib.util.find_spec("nvidia.nccl")
    except (ImportError, ValueError):
        return None
    for base in (list(spec.submodule_search_locations or []) if spec else []):
        path = os.path.join(base, "lib", "libnccl.so.2")
        if os.path.exists(path):
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            return path
    return None
