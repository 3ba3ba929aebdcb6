"""A caching allocator for device memory, in the spirit of PyTorch's.

``cudaMalloc``/``cudaFree`` synchronize the device and cost tens of
microseconds, far more than launching a small kernel.  So freed blocks are
not returned to the driver: they go on a free list for their size class and
the next request of that class takes one without calling the driver.  Sizes
round up to 512 bytes below 1 MiB and to 2 MiB above, so that a loop that
allocates slightly different sizes still hits the cache.  ``empty_cache()``
returns the cached blocks to the driver; an allocation that fails empties
the cache and tries once more before raising ``CudaOutOfMemoryError``.

Unlike PyTorch's, blocks are not split or merged: a request takes a block
of exactly its size class.
"""

from __future__ import annotations

import threading

import numpy as np

from ..errors import CudaOutOfMemoryError
from .runtime import cuda_module

__all__ = ["Block", "CachingAllocator", "allocator", "round_size"]

_SMALL = 1 << 20
_SMALL_ROUND = 512
_LARGE_ROUND = 2 << 20


def round_size(nbytes: int) -> int:
    """The size class of a request (at least 512 bytes, so every dtype is aligned)."""
    r = _SMALL_ROUND if nbytes <= _SMALL else _LARGE_ROUND
    return max(r, -(-nbytes // r) * r)


class Block:
    """One device allocation: a 1-D uint8 device array of a size class.

    ``views`` caches the block's typed views (dtype -> (device array, address)): a block is
    reused many times, and a Numba device-array view costs microseconds to make.
    """

    __slots__ = ("mem", "size", "views")

    def __init__(self, mem, size: int):
        self.mem, self.size, self.views = mem, size, {}


def _driver_malloc(size: int):
    return cuda_module().device_array(size, np.uint8)


def _is_oom(e: BaseException) -> bool:
    return isinstance(e, MemoryError) or "OUT_OF_MEMORY" in str(e) or "out of memory" in str(e).lower()


class CachingAllocator:
    def __init__(self):
        self._free: dict[int, list[Block]] = {}
        self._lock = threading.Lock()
        self.malloc_fn = _driver_malloc     # replaced by tests to simulate running out of memory
        self.reset_stats()

    def reset_stats(self) -> None:
        self.allocated = 0          # bytes in blocks handed out
        self.reserved = 0           # bytes held from the driver (handed out + cached)
        self.peak_allocated = 0
        self.driver_allocs = 0      # cudaMalloc calls
        self.cache_hits = 0
        self.driver_frees = 0

    def malloc(self, nbytes: int) -> Block:
        size = round_size(nbytes)
        with self._lock:
            lst = self._free.get(size)
            if lst:
                b = lst.pop()
                self.cache_hits += 1
            else:
                b = self._driver(size, nbytes)
            self.allocated += size
            if self.allocated > self.peak_allocated:
                self.peak_allocated = self.allocated
        return b

    def _driver(self, size: int, requested: int) -> Block:
        try:
            mem = self.malloc_fn(size)
        except Exception as e:
            if not _is_oom(e):
                raise
            self._release_cached()          # one retry with the cache given back to the driver
            try:
                mem = self.malloc_fn(size)
            except Exception as e2:
                if not _is_oom(e2):
                    raise
                raise CudaOutOfMemoryError(
                    f"CUDA out of memory: tried to allocate {_fmt(requested)} (a {_fmt(size)} block); "
                    f"{_fmt(self.allocated)} already allocated by dispatch_jit, {_fmt(self.reserved)} reserved. "
                    f"Free tensors you no longer need (del t) or use smaller inputs") from None
        self.driver_allocs += 1
        self.reserved += size
        return Block(mem, size)

    def free(self, block: Block) -> None:
        with self._lock:
            self.allocated -= block.size
            self._free.setdefault(block.size, []).append(block)

    def _release_cached(self) -> None:
        for lst in self._free.values():
            for b in lst:
                self.reserved -= b.size
                self.driver_frees += 1
                b.mem = None
                b.views = {}
        self._free.clear()

    def empty_cache(self) -> None:
        with self._lock:
            self._release_cached()

    def cached_blocks(self) -> int:
        return sum(len(v) for v in self._free.values())


def _fmt(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n} bytes"


allocator = CachingAllocator()
