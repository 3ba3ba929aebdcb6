"""softmax backward over rows (cpu.py's ``softmax_backward``, float32 and float64):
dx = y * (g - sum_j g_j * y_j), eight rows at a time.

Each row's dot is one float64 add chain, j = 0, 1, ..., c - 1 left to right (float32 products
are exact in float64), and it stays so: the order is the row's own, so the bits depend neither
on the block of rows, the row count nor the thread count, and the compiled plans (which call
this kernel) agree with eager.  What changed is that eight rows' chains run interleaved:
one row's chain was latency-bound (one float64 add per 4 cycles); eight independent chains
are bound by the loads and conversions instead.  Measured on attention's 2048 rows of 32
float32 (bare kernel, minima of 200 interleaved calls, 2-core machine at load ~3):
69 -> 52 us; the row dot alone took 39 us of it, the dx pass 10.

What did not pay (the same measurements): the rows held column by column (the products
transposed into a scratch block, the dots then summed across rows in vector lanes: 58-100 us,
the transpose costs what the vector adds save); eight lanes within a row (``rows32.sum8``'s
order: 66 us, Numba runs no SLP vectorizer, so the lanes stay scalar); the products first
written to a float64 scratch block (76-83 us).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["softmax_backward_rows"]


@numba.njit(boundscheck=False, inline="always")
def _dx(g, y, out, i, s):
    for j in range(g.shape[1]):
        out[i, j] = np.float64(y[i, j]) * (np.float64(g[i, j]) - s)


@numba.njit(boundscheck=False)
def _dot(g, y, i):
    s = 0.0
    for j in range(g.shape[1]):
        s += np.float64(g[i, j]) * np.float64(y[i, j])
    return s


@numba.njit(boundscheck=False)
def softmax_backward_rows(g, y, out):
    """PyTorch's _softmax_backward_data over the rows of ``g`` and ``y`` into ``out``."""
    n, c = g.shape
    n8 = n - n % 8
    for i in range(0, n8, 8):
        s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
        for j in range(c):
            s0 += np.float64(g[i, j]) * np.float64(y[i, j])
            s1 += np.float64(g[i + 1, j]) * np.float64(y[i + 1, j])
            s2 += np.float64(g[i + 2, j]) * np.float64(y[i + 2, j])
            s3 += np.float64(g[i + 3, j]) * np.float64(y[i + 3, j])
            s4 += np.float64(g[i + 4, j]) * np.float64(y[i + 4, j])
            s5 += np.float64(g[i + 5, j]) * np.float64(y[i + 5, j])
            s6 += np.float64(g[i + 6, j]) * np.float64(y[i + 6, j])
            s7 += np.float64(g[i + 7, j]) * np.float64(y[i + 7, j])
        _dx(g, y, out, i, s0)
        _dx(g, y, out, i + 1, s1)
        _dx(g, y, out, i + 2, s2)
        _dx(g, y, out, i + 3, s3)
        _dx(g, y, out, i + 4, s4)
        _dx(g, y, out, i + 5, s5)
        _dx(g, y, out, i + 6, s6)
        _dx(g, y, out, i + 7, s7)
    for i in range(n8, n):
        _dx(g, y, out, i, _dot(g, y, i))
