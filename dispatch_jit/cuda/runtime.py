"""The CUDA runtime as dispatch_jit sees it: availability, devices, synchronization.

``numba.cuda`` is imported lazily, on the first CUDA question, so that
``import dispatch_jit`` stays fast and CPU-only users never load it.  With
``NUMBA_ENABLE_CUDASIM=1`` (set before the first import) Numba's CUDA
simulator stands in for a GPU: kernels run as Python threads on host memory,
which is how CI tests the CUDA backend without hardware.
"""

from __future__ import annotations

import functools

from ..errors import CudaUnavailableError
from ..signature import check_device_index

__all__ = ["cuda_module", "is_available", "is_simulator", "device_count", "synchronize", "require",
           "device_attributes", "DeviceAttributes"]


@functools.lru_cache(maxsize=None)
def cuda_module():
    """``numba.cuda``, or None when it cannot be imported."""
    try:
        from numba import cuda
    except Exception:      # an incomplete CUDA toolkit can fail in many ways at import
        return None
    return cuda


@functools.lru_cache(maxsize=None)
def is_available() -> bool:
    cuda = cuda_module()
    if cuda is None:
        return False
    try:
        return bool(cuda.is_available())
    except Exception:
        return False


@functools.lru_cache(maxsize=None)
def is_simulator() -> bool:
    """True when Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1) stands in for a GPU."""
    cuda = cuda_module()
    if cuda is None:
        return False
    from numba.cuda.core import config
    return bool(config.ENABLE_CUDASIM)


def device_count() -> int:
    if not is_available():
        return 0
    try:
        return len(cuda_module().list_devices())
    except Exception:
        return 0


def require(index: int = 0) -> None:
    """Raise a clear error unless CUDA device ``index`` can be used."""
    check_device_index(index)      # cuda:16 and up: the signature's limit, named
    if not is_available():
        raise CudaUnavailableError(
            "no CUDA device is available: dispatch_jit found neither a GPU with a working driver nor "
            "Numba's CUDA simulator (set NUMBA_ENABLE_CUDASIM=1 before importing to use it); "
            "use device='cpu'")
    n = device_count()
    if index >= n:
        raise CudaUnavailableError(f"CUDA device cuda:{index} does not exist: {n} device(s) available")
    problem = compiler_problem()
    if problem:
        raise CudaUnavailableError(problem)


@functools.lru_cache(maxsize=None)
def compiler_problem() -> str | None:
    """Why numba-cuda cannot compile kernels here, or None.

    numba-cuda loads its typing registries on the first kernel compile, and a
    NumPy newer than it was built against can fail there, deep inside Numba
    (numba-cuda 0.30 overloads ``np.row_stack``, which NumPy 2.5 removed).
    Importing the registry module up front turns that into one clear error
    at the first CUDA tensor instead of a traceback from every kernel.
    """
    if is_simulator():
        return None
    import importlib
    try:
        importlib.import_module("numba.cuda.np.arrayobj")
    except ModuleNotFoundError:       # another numba-cuda layout: nothing to check here
        return None
    except Exception as e:
        import numpy
        try:
            from importlib.metadata import version
            ncv = version("numba-cuda")
        except Exception:
            ncv = "(unknown version)"
        return (f"numba-cuda {ncv} cannot compile CUDA kernels with NumPy {numpy.__version__} "
                f"({type(e).__name__}: {e}); install a NumPy that this numba-cuda supports "
                f"(numba-cuda 0.30 needs numpy<2.5) or a numba-cuda release made for this NumPy")
    return None


def synchronize(device=None) -> None:
    """Wait until every kernel launched so far on the default stream has finished."""
    if is_available():
        cuda_module().synchronize()


class DeviceAttributes:
    """What launch configuration needs to know about a device."""

    def __init__(self, name: str, sm_count: int, max_threads: int, warp_size: int, cc: tuple,
                 simulated: bool):
        self.name, self.sm_count, self.max_threads = name, sm_count, max_threads
        self.warp_size, self.compute_capability, self.simulated = warp_size, cc, simulated

    def __repr__(self):
        return (f"DeviceAttributes(name={self.name!r}, sm_count={self.sm_count}, max_threads={self.max_threads}, "
                f"warp_size={self.warp_size}, compute_capability={self.compute_capability})")


@functools.lru_cache(maxsize=None)
def device_attributes(index: int = 0) -> DeviceAttributes:
    require(index)
    cuda = cuda_module()
    if is_simulator():
        # the simulator runs one Python thread per CUDA thread: keep blocks small
        return DeviceAttributes("Numba CUDA simulator", 2, 64, 32, (5, 2), True)
    dev = cuda.list_devices()[index]
    with dev:
        d = cuda.get_current_device()
        name = d.name.decode() if isinstance(d.name, bytes) else str(d.name)
        return DeviceAttributes(name, d.MULTIPROCESSOR_COUNT, d.MAX_THREADS_PER_BLOCK, d.WARP_SIZE,
                                tuple(d.compute_capability), False)
