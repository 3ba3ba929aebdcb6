"""``dj.cuda``: devices, synchronization and the caching allocator.

>>> import dispatch_jit as dj
>>> isinstance(dj.cuda.is_available(), bool)
True
>>> dj.cuda.device_count() >= 0
True

Kernels run asynchronously on the default stream; ``synchronize()`` waits
for them (``.numpy()``, ``.item()``, ``.cpu()`` and ``repr`` do so too).
"""

from __future__ import annotations

from .allocator import allocator as _allocator
from .runtime import device_attributes, device_count, is_available, is_simulator, synchronize

__all__ = ["is_available", "is_simulator", "device_count", "synchronize", "current_device", "get_device_name",
           "memory_allocated", "max_memory_allocated", "memory_reserved", "empty_cache", "reset_peak_memory_stats",
           "memory_stats"]


def current_device() -> int:
    return 0


def get_device_name(device=None) -> str:
    """The device's name (``"Numba CUDA simulator"`` under NUMBA_ENABLE_CUDASIM=1)."""
    return device_attributes(_index(device)).name


def _index(device) -> int:
    if device is None:
        return 0
    if isinstance(device, int):
        return device
    from ..tensor import device as _dev
    return _dev(device).index or 0


def memory_allocated(device=None) -> int:
    """Bytes of device memory held by live tensors (in allocator size classes)."""
    return _allocator.allocated


def max_memory_allocated(device=None) -> int:
    """The peak of ``memory_allocated()`` since start or ``reset_peak_memory_stats()``."""
    return _allocator.peak_allocated


def memory_reserved(device=None) -> int:
    """Bytes held from the driver: allocated plus cached for reuse."""
    return _allocator.reserved


def reset_peak_memory_stats(device=None) -> None:
    _allocator.peak_allocated = _allocator.allocated


def empty_cache() -> None:
    """Return cached, unused blocks to the driver (live tensors keep theirs)."""
    _allocator.empty_cache()


def memory_stats(device=None) -> dict:
    """Allocator counters: bytes allocated/reserved/peak, driver allocations and frees, cache hits."""
    a = _allocator
    return {"allocated_bytes": a.allocated, "reserved_bytes": a.reserved, "peak_allocated_bytes": a.peak_allocated,
            "num_driver_allocs": a.driver_allocs, "num_driver_frees": a.driver_frees,
            "num_cache_hits": a.cache_hits, "num_cached_blocks": a.cached_blocks()}
