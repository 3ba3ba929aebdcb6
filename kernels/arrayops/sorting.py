"""Numba loops for the ordering ops: sort, argsort, searchsorted, cumulative sum and product,
nonzero.  Array level (NumPy in, NumPy out), like linalg/cpu.py: the dispatcher-facing side is
op.py.  Each loop works on a C-contiguous ``(rows, n)`` array, the op's axis last; op.py moves
the axis there and back.  NaNs order after every number (NumPy's and the array API's order).
"""

from __future__ import annotations

import numba
import numpy as np

from dispatch_jit.jit import cache

__all__ = ["sort_rows", "argsort_rows", "searchsorted", "cumulate_rows", "nonzero_flat", "mode_rows", "compiled_signatures"]

_KIND = __name__


@numba.njit(cache=False)
def _sort(a, out):
    for r in range(a.shape[0]):
        out[r] = np.sort(a[r])


@numba.njit(cache=False)
def _argsort(a, out):
    # mergesort: stable, as the array API's default (stable=True) asks
    for r in range(a.shape[0]):
        out[r] = np.argsort(a[r], kind="mergesort")


@numba.njit(cache=False)
def _before(a, b):
    """a sorts strictly before b, NaNs last."""
    return a < b or (b != b and a == a)


@numba.njit(cache=False)
def _searchsorted(s, v, right, out):
    n = s.shape[0]
    for i in range(v.shape[0]):
        x = v[i]
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) >> 1
            # left: the first position whose element is not before x; right: the first after x
            if (not _before(x, s[mid])) if right else _before(s[mid], x):
                lo = mid + 1
            else:
                hi = mid
        out[i] = lo


def _scan(combine):
    """A running ``combine`` (sum or product) along each row, accumulated in the row's dtype
    (Numba widens narrow ints while adding; the store wraps them back, as NumPy's wrap)."""
    @numba.njit(cache=False)
    def scan(a, out):
        for r in range(a.shape[0]):
            if a.shape[1] == 0:
                continue
            acc = a[r, 0]
            out[r, 0] = acc
            for j in range(1, a.shape[1]):
                acc = combine(acc, a[r, j])
                out[r, j] = acc
    return scan


@numba.njit(cache=False)
def _add(a, b):
    return a + b


@numba.njit(cache=False)
def _mul(a, b):
    return a * b


_cumsum, _cumprod = _scan(_add), _scan(_mul)


@numba.njit(cache=False)
def _nonzero(a, out):
    k = 0
    for i in range(a.shape[0]):
        if a[i] != 0:
            out[k] = i
            k += 1


@numba.njit(cache=False)
def _mode(a, idx, out):
    """Per row of ``a`` sorted stably (``idx``: where each element came from): the position, in the
    original row, of the last occurrence of the most frequent value; ties go to the smallest value
    (the first run), NaNs count as one value, as torch.mode."""
    n = a.shape[1]
    for r in range(a.shape[0]):
        best, best_at, start = 0, 0, 0
        for j in range(1, n + 1):
            if j < n:
                x, y = a[r, j], a[r, j - 1]
                if x == y or (x != x and y != y):
                    continue
            if j - start > best:
                best, best_at = j - start, j - 1
            start = j
        out[r] = idx[r, best_at]


_LOOPS = {"mode": _mode, "sort": _sort, "argsort": _argsort, "cumsum": _cumsum, "cumprod": _cumprod,
          "searchsorted": _searchsorted, "nonzero": _nonzero}
_ENTRIES = cache.entries(_KIND)
_I64 = np.dtype(np.int64)


def _array_type(dt: np.dtype, ndim: int):
    return numba.types.Array(numba.from_dtype(dt), ndim, "C")


def _entry(name: str, dt: np.dtype, sig):
    """The loop ``name`` for ``dt``, compiled (once per dtype, through the one compile cache) for the
    signature ``sig()`` makes: only on a miss, as making Numba array types costs microseconds a call."""
    ep = _ENTRIES.get((name, dt))
    return ep if ep is not None else cache.njit_function(_KIND, (name, dt), name, _LOOPS[name], sig())


def sort_rows(a: np.ndarray) -> np.ndarray:
    out = np.empty_like(a)
    _entry("sort", a.dtype, lambda: (_array_type(a.dtype, 2),) * 2)(a, out)
    return out


def argsort_rows(a: np.ndarray) -> np.ndarray:
    out = np.empty(a.shape, np.int64)
    _entry("argsort", a.dtype, lambda: (_array_type(a.dtype, 2), _array_type(_I64, 2)))(a, out)
    return out


def mode_rows(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The index of each row's mode: ``a`` the rows sorted stably, ``idx`` their argsort (both
    C-contiguous ``(rows, n)``, n > 0)."""
    out = np.empty(a.shape[0], np.int64)
    _entry("mode", a.dtype, lambda: (_array_type(a.dtype, 2), _array_type(_I64, 2), _array_type(_I64, 1)))(a, idx, out)
    return out


def cumulate_rows(name: str, a: np.ndarray) -> np.ndarray:
    """Running sum or product along each row of ``a``, in ``a``'s dtype."""
    out = np.empty_like(a)
    if a.size:
        _entry(name, a.dtype, lambda: (_array_type(a.dtype, 2),) * 2)(a, out)
    return out


def searchsorted(s: np.ndarray, v: np.ndarray, right: bool) -> np.ndarray:
    out = np.empty(v.shape, np.int64)
    _entry("searchsorted", s.dtype,
           lambda: (_array_type(s.dtype, 1),) * 2 + (numba.types.boolean, _array_type(_I64, 1)))(s, v, right, out)
    return out


def nonzero_flat(a: np.ndarray) -> np.ndarray:
    """The flat positions of ``a``'s nonzero elements (``a`` 1-d, contiguous), ascending."""
    out = np.empty(int(np.count_nonzero(a)), np.int64)
    _entry("nonzero", a.dtype, lambda: (_array_type(a.dtype, 1), _array_type(_I64, 1)))(a, out)
    return out


def compiled_signatures() -> dict[str, list[str]]:
    """Loop name -> the Numba signatures compiled so far.

    >>> isinstance(compiled_signatures(), dict)
    True
    """
    return cache.signatures(_KIND)
