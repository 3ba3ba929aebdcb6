"""cat's copy: each C-contiguous piece written into its columns of the result as bytes.

``np.concatenate`` along an inner axis copies each piece row by row through NumPy's strided
inner loop; on the GPT's cats (512 rows of 64 + 64 + 64 or 128 + 64 float32 along the last
axis) that took 12-14 us where this loop takes 10: each row of a piece is one run of
``w * itemsize`` bytes, and one compiled loop over bytes serves every dtype (a single
The indices are cast to unsigned: with signed ones Numba's negative-index wraparound kept
LLVM from vectorizing the copy (40 us).

A piece that is not C-contiguous is copied by NumPy's assignment instead (its elements are
not one run per row).

>>> import numpy as np
>>> out = np.empty((2, 3), np.int64)
>>> cat_into([np.array([[1], [2]]), np.array([[3, 4], [5, 6]])], 1, out); out
array([[1, 3, 4],
       [2, 5, 6]])
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import types as nbt

from dispatch_jit.jit import cache

__all__ = ["cat_into", "CAT_LOOP_MIN"]

# below this many elements in the result NumPy's concatenate is faster: a call of the compiled
# loop costs about 1 us a piece (3.7 us for three 2 x 4 pieces, np.concatenate 1.1)
CAT_LOOP_MIN = 4096

_KIND = "shape"
_WORDS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_ENTRY = cache.entries(_KIND)


@numba.njit(boundscheck=False)
def _copy_runs(src, dst, rows, total, at):
    """Row i of ``src`` (``len(src) // rows`` words) into words ``at`` on of row i of ``dst``
    (``total`` words a row)."""
    w = len(src) // rows
    for i in range(rows):
        o = i * total + at
        s = i * w
        for q in range(w):
            dst[np.uint64(o + q)] = src[np.uint64(s + q)]

def _kernel(word):
    key = ("copy_runs", word)
    ep = _ENTRY.get(key)
    if ep is None:
        w = nbt.Array(numba.from_dtype(np.dtype(word)), 1, "C")
        ep = cache.njit_function(_KIND, key, "copy_runs", _copy_runs, (w, w, nbt.int64, nbt.int64, nbt.int64))
    return ep


def cat_into(arrays: list, axis: int, out: np.ndarray) -> None:
    """``np.concatenate(arrays, axis, out=out)`` for a C-contiguous ``out`` of the arrays' dtype
    (shapes checked by the caller: cat_plan)."""
    rows = math.prod(out.shape[:axis])
    inner = math.prod(out.shape[axis + 1:])
    if out.size == 0:
        return
    word = _WORDS.get(out.itemsize, np.uint64)      # complex128: two 8-byte words an element
    per = out.itemsize // np.dtype(word).itemsize
    dst = out.reshape(-1).view(word)
    total = out.shape[axis] * inner * per
    kernel, at = None, 0
    for a in arrays:
        n = a.shape[axis]
        if n and a.flags.c_contiguous:
            kernel = kernel or _kernel(word)
            kernel(a.reshape(-1).view(word), dst, rows, total, at * inner * per)
        elif n:
            out[(slice(None),) * axis + (slice(at, at + n),)] = a
        at += n
