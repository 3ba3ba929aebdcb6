"""A pool of large host output buffers, reused once nothing can observe them.

Why: a fresh 40 MB NumPy array costs ~5 ms of page faults (glibc maps every
allocation above 32 MiB anew and unmaps it on free), more than a fused loop
needs to fill it (~2-4 ms).  A compiled call that allocates its output from
this pool gets memory whose pages are already mapped, as PyTorch's caching
allocator gives a CUDA kernel memory it does not have to ask the driver for.

How: a buffer is a block, a 1-D ``uint8`` array that the pool owns; what a
caller gets is an array *viewing* the block (``np.ndarray(..., buffer=block)``).
NumPy points every view, reshape, slice, ``.numpy()`` result, memoryview or
Numba reference to that array back at the block, so the block's reference
count says whether anything at all can still read or write it: when the only
references left are the pool's own (and no weak reference exists, through
which one could come back), the block is free and the next request of its
size class reuses it.  Nothing is "returned" explicitly, so there is no
owner to get wrong: tensors, views, arrays saved for autograd, ``out=``
targets and NumPy arrays the user took all keep the block busy for exactly
as long as they live.  A reference cycle that the garbage collector has not
collected yet keeps it busy too (a miss, never an error).

A raw pointer taken out of Python (``arr.ctypes.data`` as an int, kept after
the array is dropped) is not a reference, as with any NumPy array whose
memory is freed.

Size classes: the request rounded up to a quarter of its power of two (at
most 25% larger, and untouched tail pages cost nothing); only requests of at
least ``min_bytes`` (default 4 MiB, where NumPy also asks for huge pages) go
through the pool, smaller ones are plain ``np.empty``, which malloc serves
from memory it already has.  ``max_bytes`` (default 256 MiB) caps the bytes
of all blocks the pool tracks, busy or free: past it, free blocks are
released (largest classes first), and if that is not enough the request gets a plain
``np.empty`` the pool does not track.  ``DISPATCH_JIT_POOL_MAX_BYTES`` and
``DISPATCH_JIT_POOL_MIN_BYTES`` set the defaults; ``set_limits`` changes them,
``empty_pool()`` releases every free block, ``pool_info()`` counts.

Threads: one lock around the scan and the hand-out; a free block is referenced
by the pool alone, so no other thread can take a reference to it except
through the pool, under that lock.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from collections import namedtuple

import numpy as np

from .errors import InterpreterError, InvalidArgumentError

__all__ = ["BufferPool", "PoolInfo", "pool", "pool_empty", "pool_info", "empty_pool", "set_limits"]

PoolInfo = namedtuple("PoolInfo", "hits misses untracked blocks bytes free_blocks free_bytes max_bytes min_bytes")
PoolInfo.__doc__ = """Counters of the buffer pool: ``hits`` (requests served by a free block),
``misses`` (requests that allocated a new block), ``untracked`` (requests past
``max_bytes``, given a plain array), ``blocks``/``bytes`` (blocks tracked, busy
or free), ``free_blocks``/``free_bytes`` (of those, the ones nothing refers to),
and the two limits."""

_getrefcount = sys.getrefcount
_getweakrefcount = weakref.getweakrefcount


def _is_free(blocks: list, i: int, limit: int) -> bool:
    """Whether ``blocks[i]`` is referenced by ``blocks`` alone (its refcount, as seen
    from here, is at most ``limit``) and by no weak reference."""
    return _getrefcount(blocks[i]) <= limit and not _getweakrefcount(blocks[i])


def _free_index(blocks: list, limit: int) -> int:
    """Index of the first free block of ``blocks``; -1 if none."""
    for i in range(len(blocks)):
        if _is_free(blocks, i, limit):
            return i
    return -1


def _calibrate() -> int:
    """The refcount ``_is_free`` sees for a block held by its list alone: measured,
    not assumed, since interpreters differ in the temporary references they hold."""
    lst = [np.empty(1, np.uint8)]
    for limit in range(1, 16):
        if _is_free(lst, 0, limit):
            held = lst[0]
            if _is_free(lst, 0, limit):      # a second reference must make it busy
                break
            del held
            return limit
    raise InterpreterError("bufferpool: cannot calibrate reference counts on this interpreter")


_FREE_RC = _calibrate()


def size_class(nbytes: int) -> int:
    """``nbytes`` rounded up to a multiple of an eighth of the next power of two (at least 4 KiB)."""
    step = 1 << max((nbytes - 1).bit_length() - 3, 12)
    return -(-nbytes // step) * step


def _env_bytes(name: str, default: int) -> int:
    v = os.environ.get(name, "").strip()
    try:
        return int(v) if v else default
    except ValueError:
        raise InvalidArgumentError(f"{name}={v!r}: expected a number of bytes") from None


class BufferPool:
    """Large output buffers, reused when nothing refers to them any more (see the module docstring).

    >>> from dispatch_jit.bufferpool import BufferPool
    >>> p = BufferPool(max_bytes=1 << 26, min_bytes=1 << 20)
    >>> a = p.empty((1 << 19,), "float32"); addr = a.ctypes.data
    >>> b = p.empty((1 << 19,), "float32")        # a is alive: another block
    >>> b.ctypes.data != addr
    True
    >>> del a
    >>> p.empty((1 << 19,), "float32").ctypes.data == addr   # nothing refers to a's block now
    True
    >>> p.info().hits, p.info().misses
    (1, 2)
    """

    def __init__(self, max_bytes: int = 256 << 20, min_bytes: int = 4 << 20):
        self._lock = threading.Lock()
        self._blocks: dict[int, list] = {}     # size class -> blocks, least recently handed out first
        # id(block) -> times handed out: compiled mode tells a block reused (so free in between: no NumPy
        # array the user took can view it any more) from one still viewed since it was exported (lazy/watch.py)
        self._handouts: dict[int, int] = {}
        self.bytes = 0
        self.hits = self.misses = self.untracked = 0
        self.max_bytes = self.min_bytes = 0
        self.small = 0
        self.set_limits(max_bytes, min_bytes)

    def set_limits(self, max_bytes: int | None = None, min_bytes: int | None = None) -> None:
        """Change the cap on tracked bytes and the smallest request the pool serves."""
        if max_bytes is not None:
            if max_bytes < 0:
                raise InvalidArgumentError(f"max_bytes must be >= 0, got {max_bytes}")
            self.max_bytes = int(max_bytes)
        if min_bytes is not None:
            if min_bytes < 1:
                raise InvalidArgumentError(f"min_bytes must be >= 1, got {min_bytes}")
            self.min_bytes = int(min_bytes)
        # callers may skip the pool for outputs of fewer elements than this (16: the largest itemsize)
        self.small = self.min_bytes // 16
        with self._lock:
            self._release(self.bytes - self.max_bytes)

    def empty(self, shape, dtype, n: int | None = None) -> np.ndarray:
        """An uninitialized C-contiguous array, like ``np.empty(shape, dtype)``; ``n``: its
        element count when the caller knows it."""
        dt = np.dtype(dtype)
        if n is None:
            n = 1
            for d in ((shape,) if isinstance(shape, int) else shape):
                n *= d
        nbytes = n * dt.itemsize
        if nbytes < self.min_bytes:
            return np.empty(shape, dt)
        cls = size_class(nbytes)
        with self._lock:
            blocks = self._blocks.get(cls)
            if blocks:
                i = _free_index(blocks, _FREE_RC)
                if i >= 0:
                    self.hits += 1
                    blk = blocks.pop(i)
                    blocks.append(blk)
                    self._handouts[id(blk)] += 1
                    return np.ndarray(shape, dt, buffer=blk)
            self.misses += 1
            if self.bytes + cls > self.max_bytes:
                self._release(self.bytes + cls - self.max_bytes)
                if self.bytes + cls > self.max_bytes:
                    self.untracked += 1
                    return np.empty(shape, dt)
            blk = np.empty(cls, np.uint8)
            self._blocks.setdefault(cls, []).append(blk)
            self._handouts[id(blk)] = 1
            self.bytes += cls
            return np.ndarray(shape, dt, buffer=blk)

    def _release(self, need: int) -> int:
        """Drop free blocks (largest classes first, least recently used first within a class) until ``need`` bytes
        are released (all of them when ``need`` is None).  Holds the lock."""
        freed = 0
        for cls in sorted(self._blocks, reverse=True):
            if need is not None and freed >= need:
                break
            blocks = self._blocks[cls]
            while need is None or freed < need:
                i = _free_index(blocks, _FREE_RC)
                if i < 0:
                    break
                self._handouts.pop(id(blocks[i]), None)
                del blocks[i]
                self.bytes -= cls
                freed += cls
            if not blocks:
                del self._blocks[cls]
        return freed

    def handouts(self, block) -> int | None:
        """How many times ``block`` was handed out; None if it is not one of this pool's blocks."""
        return self._handouts.get(id(block))

    def clear(self) -> int:
        """Release every free block; returns the bytes released.  Busy blocks stay tracked."""
        with self._lock:
            return self._release(None)

    def info(self) -> PoolInfo:
        with self._lock:
            nblocks = free_blocks = free_bytes = 0
            for cls, blocks in self._blocks.items():
                nblocks += len(blocks)
                for i in range(len(blocks)):
                    if _is_free(blocks, i, _FREE_RC):
                        free_blocks += 1
                        free_bytes += cls
            return PoolInfo(self.hits, self.misses, self.untracked, nblocks, self.bytes, free_blocks, free_bytes,
                            self.max_bytes, self.min_bytes)

    def reset_counters(self) -> None:
        self.hits = self.misses = self.untracked = 0


pool = BufferPool(_env_bytes("DISPATCH_JIT_POOL_MAX_BYTES", 256 << 20),
                  _env_bytes("DISPATCH_JIT_POOL_MIN_BYTES", 4 << 20))
pool_empty = pool.empty


def pool_info() -> PoolInfo:
    """Counters of the process-wide output pool (compiled calls allocate their large outputs from it).

    >>> import dispatch_jit as dj
    >>> from dispatch_jit.bufferpool import pool_info
    >>> pool_info().max_bytes > 0
    True
    """
    return pool.info()


def empty_pool() -> int:
    """Release every free block of the process-wide pool; returns the bytes released."""
    return pool.clear()


def set_limits(max_bytes: int | None = None, min_bytes: int | None = None) -> None:
    """Set the process-wide pool's cap on tracked bytes and its smallest pooled request."""
    pool.set_limits(max_bytes, min_bytes)
