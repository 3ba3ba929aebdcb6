"""Numba loops for gather, scatter and scatter_add.  Array level (NumPy in, NumPy out), like
arrayops/sorting.py: op.py is the dispatcher-facing side.

Every loop walks the index array's elements in C order, keeping their coordinates (and the
offsets they give) by a carry, replaces the coordinate along ``dim`` by the index value and
reads (gather) or writes (scatter, scatter_add) the other array at those coordinates through
its element strides.  So the index may be smaller than the input in every dimension, as
PyTorch allows, with no copy of the input.  A bad index stops the loop and is returned (the
caller raises), never read past the end.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from dispatch_jit.jit import cache

__all__ = ["gather", "scatter", "compiled_signatures"]

_KIND = __name__


@numba.njit(cache=False)
def _advance(coord, ishape, xstrides, sstrides, dim, bases):
    """Step ``coord`` to the index's next position in C order, keeping ``bases[0]`` (the offset
    in x, without the ``dim`` coordinate) and ``bases[1]`` (the offset in src) up to date: a
    carry, not a division per element."""
    for d in range(ishape.shape[0] - 1, -1, -1):
        xs = 0 if d == dim else xstrides[d]
        coord[d] += 1
        if coord[d] < ishape[d]:
            bases[0] += xs
            bases[1] += sstrides[d]
            return
        bases[0] -= xs * (ishape[d] - 1)
        bases[1] -= sstrides[d] * (ishape[d] - 1)
        coord[d] = 0


@numba.njit(cache=False)
def _checked(i, size):
    """The index, or -1 when it is outside [0, size): PyTorch's gather and scatter refuse a
    negative index instead of counting it from the end."""
    return i if 0 <= i < size else -1


@numba.njit(cache=False)
def _gather(a, astrides, idx, ishape, dim, size, out):
    coord = np.zeros(ishape.shape[0], np.int64)
    bases = np.zeros(2, np.int64)
    for f in range(idx.shape[0]):
        i = _checked(idx[f], size)
        if i < 0:
            return f
        out[f] = a[bases[0] + i * astrides[dim]]
        _advance(coord, ishape, astrides, astrides, dim, bases)
    return -1


def _scatter_loop(accumulate: bool):
    @numba.njit(cache=False)
    def scatter(out, ostrides, idx, ishape, dim, size, src, sstrides):
        coord = np.zeros(ishape.shape[0], np.int64)
        bases = np.zeros(2, np.int64)
        for f in range(idx.shape[0]):
            i = _checked(idx[f], size)
            if i < 0:
                return f
            o = bases[0] + i * ostrides[dim]
            if accumulate:
                out[o] += src[bases[1]]
            else:
                out[o] = src[bases[1]]
            _advance(coord, ishape, ostrides, sstrides, dim, bases)
        return -1
    return scatter


def _scatter_rows_loop(accumulate: bool):
    # out (pre, n, post), idx (m,), src (pre, m, post), all C-contiguous: out[p, idx[i], q] (+)=
    # src[p, i, q] in the order p, i, q, the index's C order, so each element of out takes its
    # writes (or sums its terms) in the order the general loop does: the same bits
    @numba.njit(cache=False)
    def scatter_rows(out, idx, src, size):
        pre, m, post = src.shape
        if pre * post == 0:
            return -1
        for i in range(m):
            if _checked(idx[i], size) < 0:
                return i * post        # its first position in C order (p = 0, q = 0)
        for p in range(pre):
            for i in range(m):
                j = idx[i]
                for q in range(post):
                    if accumulate:
                        out[p, j, q] += src[p, i, q]
                    else:
                        out[p, j, q] = src[p, i, q]
        return -1
    return scatter_rows


_LOOPS = {"gather": _gather, "scatter": _scatter_loop(False), "scatter_add": _scatter_loop(True),
          "scatter_rows": _scatter_rows_loop(False), "scatter_add_rows": _scatter_rows_loop(True)}
_I64 = numba.types.Array(numba.int64, 1, "C")


def _array(dt: np.dtype, ndim: int = 1, layout: str = "A"):
    return numba.types.Array(numba.from_dtype(dt), ndim, layout)


_ENTRIES = cache.entries(_KIND)


def _loop(name: str, dtypes: tuple, sig):
    """The loop ``name`` compiled for ``dtypes``; ``sig()`` (its Numba signature) is built only on
    a miss: making Numba array types costs ~15 us a call, more than the GPT's embedding scatter."""
    key = (name, *dtypes)
    ep = _ENTRIES.get(key)
    return ep if ep is not None else cache.njit_function(_KIND, key, name, _LOOPS[name], sig())


def _strides(a: np.ndarray) -> np.ndarray:
    return np.array([s // a.itemsize for s in a.strides], np.int64)


def _flat(a: np.ndarray) -> np.ndarray:
    """``a``'s storage as a 1-d array from its first element, for element-stride addressing
    (``a`` has no negative strides: op.py makes contiguous copies of anything else)."""
    if a.size == 0:
        return a.reshape(-1)
    span = 1 + sum((n - 1) * (s // a.itemsize) for n, s in zip(a.shape, a.strides))
    return np.lib.stride_tricks.as_strided(a, (span,), (a.itemsize,))


def _positive_strides(a: np.ndarray) -> np.ndarray:
    return a if all(s >= 0 for s in a.strides) else np.ascontiguousarray(a)


def _as_bits(a: np.ndarray) -> np.ndarray:
    """float16 as its bits: Numba has no float16 type, and gather/scatter only move elements."""
    return a.view(np.uint16) if a.dtype == np.float16 else a


def gather(a: np.ndarray, idx: np.ndarray, dim: int) -> tuple[np.ndarray, int]:
    """``out[p] = a[p with coordinate dim = idx[p]]`` over the index's positions ``p``; and the
    flat position of the first out-of-range index (-1 if none)."""
    dtype = a.dtype
    a = _as_bits(_positive_strides(a))
    out = np.empty(idx.shape, a.dtype)
    fi = np.ascontiguousarray(idx, np.int64).reshape(-1)
    fn = _loop("gather", (a.dtype,), lambda: (_array(a.dtype), _I64, _I64, _I64, numba.int64, numba.int64,
                                               _array(a.dtype)))
    bad = fn(_flat(a), _strides(a), fi, np.array(idx.shape, np.int64), dim, a.shape[dim], out.reshape(-1))
    return out.view(dtype), int(bad)


def scatter(out: np.ndarray, idx: np.ndarray, src: np.ndarray, dim: int, accumulate: bool) -> int:
    """Write (or add) ``src[p]`` into ``out`` (C-contiguous, modified in place) at the index's
    positions ``p`` with coordinate ``dim`` replaced by ``idx[p]``; returns the flat position of
    the first out-of-range index (-1 if none).  Repeated indices: the last write wins, as
    PyTorch's CPU kernel (PyTorch documents the order as unspecified)."""
    # scatter_add gets no float16 (op.py accumulates it in float32); a plain scatter copies bits
    out, src = _as_bits(out), _as_bits(_positive_strides(src))
    name = "scatter_add" if accumulate else "scatter"
    rows = _row_index(idx, src, out.shape, dim)
    if rows is not None:
        return _scatter_rows(out, rows, src, dim, name + "_rows")
    fi = np.ascontiguousarray(idx, np.int64).reshape(-1)
    fn = _loop(name, (out.dtype, src.dtype), lambda: (_array(out.dtype), _I64, _I64, _I64, numba.int64, numba.int64,
                                                      _array(src.dtype), _I64))
    return int(fn(out.reshape(-1), _strides(out), fi, np.array(idx.shape, np.int64), dim, out.shape[dim],
                  _flat(src), _strides(src)))


def _row_index(idx: np.ndarray, src: np.ndarray, shape: tuple, dim: int):
    """The index as one vector along ``dim`` when it is that vector broadcast over the other
    dimensions, whole rows of ``out`` and ``src`` (index_select's and embedding's backward:
    ``expand`` of the rows' numbers), else None."""
    if idx.ndim == 0 or idx.shape != src.shape or any(
            k != dim and (idx.strides[k] != 0 or n != shape[k]) for k, n in enumerate(idx.shape)):
        return None
    return np.ascontiguousarray(idx[(0,) * dim + (slice(None),) + (0,) * (idx.ndim - dim - 1)], np.int64)


def _scatter_rows(out: np.ndarray, rows: np.ndarray, src: np.ndarray, dim: int, name: str) -> int:
    """scatter/scatter_add of whole rows: a contiguous inner loop where the general loop walks
    every element's coordinates (and copies the broadcast index to one int64 per element)."""
    pre, post = math.prod(out.shape[:dim]), math.prod(out.shape[dim + 1:])
    src = np.ascontiguousarray(src).reshape(pre, rows.shape[0], post)
    fn = _loop(name, (out.dtype, src.dtype), lambda: (_array(out.dtype, 3, "C"), _I64, _array(src.dtype, 3, "C"),
                                                      numba.int64))
    return int(fn(out.reshape(pre, out.shape[dim], post), rows, src, out.shape[dim]))


def compiled_signatures() -> dict[str, list[str]]:
    """Loop name -> the Numba signatures compiled so far.

    >>> isinstance(compiled_signatures(), dict)
    True
    """
    return cache.signatures(_KIND)
