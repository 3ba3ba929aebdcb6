"""The Numba loop of topk: the k best elements of each row, found in one pass.

Each row keeps its best k so far in a small sorted buffer; an element enters only if it is
better than the buffer's last, and is inserted by shifting the worse ones down (insertion into
a sorted run).  "Better" is PyTorch's order: larger (or smaller, ``largest=False``), NaN above
every number, and among equal elements the earlier one (an element displaces only a strictly
worse one), so the result is sorted and ties keep their index order.  The pass costs O(n) per
row plus O(k) per insertion: for a large k, op.py takes the stable sort instead.
"""

from __future__ import annotations

import numba
import numpy as np

from dispatch_jit.jit import cache

__all__ = ["topk_rows", "compiled_signatures"]

_KIND = __name__
_ENTRIES = cache.entries(_KIND)


@numba.njit(cache=False)
def _better(a, b, largest):
    if largest:
        return a > b or (a != a and b == b)      # x != x: NaN (never true for integers)
    return a < b or (b != b and a == a)


@numba.njit(cache=False)
def _topk(rows, k, largest, vals, idx):
    n = rows.shape[1]
    for r in range(rows.shape[0]):
        cnt = 0
        for j in range(n):
            v = rows[r, j]
            if cnt == k and not _better(v, vals[r, k - 1], largest):
                continue
            p = cnt if cnt < k else k - 1        # a full buffer drops its last
            while p > 0 and _better(v, vals[r, p - 1], largest):
                vals[r, p] = vals[r, p - 1]
                idx[r, p] = idx[r, p - 1]
                p -= 1
            vals[r, p] = v
            idx[r, p] = j
            if cnt < k:
                cnt += 1


def topk_rows(rows: np.ndarray, k: int, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    """The k best of each row of ``rows`` (2-d, C-contiguous, a Numba dtype), best first: their
    values and their positions in the row."""
    vals = np.empty((rows.shape[0], k), rows.dtype)
    idx = np.empty((rows.shape[0], k), np.int64)
    if k and rows.size:
        fn = _ENTRIES.get(("topk", rows.dtype))
        if fn is None:      # Numba's array types cost ~15 us to make: only on a miss
            arr = numba.types.Array(numba.from_dtype(rows.dtype), 2, "C")
            sig = (arr, numba.int64, numba.boolean, arr, numba.types.Array(numba.int64, 2, "C"))
            fn = cache.njit_function(_KIND, ("topk", rows.dtype), "topk", _topk, sig)
        fn(rows, k, largest, vals, idx)
    return vals, idx


def compiled_signatures() -> dict[str, list[str]]:
    """Loop name -> the Numba signatures compiled so far.

    >>> isinstance(compiled_signatures(), dict)
    True
    """
    return cache.signatures(_KIND)
