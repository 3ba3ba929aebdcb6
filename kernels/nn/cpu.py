"""CPU kernels of the nn family over NumPy arrays: softmax and log_softmax along the last
axis of a C-contiguous 2-D view (forward and backward), nll_loss, the fused
cross-entropy (log_softmax and nll_loss in one pass, forward and backward) and linear's
bias and its gradient (a row-broadcast add, a column sum).

Every loop computes in float64 and stores in the array's dtype (float32 or float64;
op.py computes float16 in float32, as PyTorch's CPU kernels do), so a float32 row sum
is essentially exact; float32 softmax, log_softmax and cross-entropy take their exp in
float32 arithmetic, as PyTorch's (rows32.py: 3x faster on attention's rows).  Rows are short in training (classes), so the loops are serial
and per row: the result of a row never depends on its neighbours or on the thread
count.  Outputs are allocated by the caller (op.py) and passed in.

Each kernel compiles once per dtype, through the one compile cache
(``dispatch_jit/jit/cache.py``, kind "nn"), and ``get(name, dtype)`` returns the
compiled entry point, not Numba's generic dispatcher.

>>> import numpy as np
>>> x = np.array([[0.0, 0.0]], np.float32); out = np.empty_like(x)
>>> get("softmax", x.dtype)(x, out); out
array([[0.5, 0.5]], dtype=float32)
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import types as nbt

from dispatch_jit.jit import cache

# exp as range reduction + polynomial (within 1.5 ulp of libm's, measured where it is defined):
# a flat loop of it vectorizes, libm's exp is one opaque call per element (no SVML in PyPI's llvmlite)
from ..reduction.codegen import _exp
from .rows32 import scratch32, shifted_exps32, softmax_rows32, sum8
from .rows_bwd import softmax_backward_rows

__all__ = ["get", "compiled_signatures", "DTYPES", "check_targets"]

_KIND = "nn"
DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


@numba.njit(boundscheck=False)
def _row_max(x, i):
    """The row's max, NaN if the row holds one (then the whole row is NaN, as PyTorch's)."""
    m = -np.inf
    for j in range(x.shape[1]):
        v = np.float64(x[i, j])
        if v > m or v != v:
            m = v
    return m


_BLOCK = 4096   # float64 scratch elements per block of rows (32 KB: stays in cache, whatever the input's size)


@numba.njit(boundscheck=False)
def _block_scratch(nclass):
    """(rows per block of shifted exponentials: at least one, whatever the row's length; the block's
    row maxima; its exponentials)."""
    per = max(1, _BLOCK // max(nclass, 1))
    return per, np.empty(per), np.empty(per * nclass)


@numba.njit(boundscheck=False)
def _shifted_exps(x, i0, i1, m, e):
    """For rows i0..i1-1: m[i - i0] = the row's max, e[(i - i0) * C + j] = exp(x[i, j] - max)
    (a NaN row: NaN).

    The differences are written first and exponentiated in one flat loop: with the polynomial
    ``_exp`` that loop vectorizes, and even with libm's exp it ran twice as fast as one exp per
    element inside the row loop (20 -> 9 us on 512 x 3 float32; 5.6 us with ``_exp``)."""
    nclass = x.shape[1]
    for i in range(i0, i1):
        mi = _row_max(x, i)
        m[i - i0] = mi
        for j in range(nclass):
            e[(i - i0) * nclass + j] = np.float64(x[i, j]) - mi
    for q in range((i1 - i0) * nclass):
        e[q] = _exp(e[q])


@numba.njit(boundscheck=False, error_model="numpy")
def _softmax_columns(x, out, log, i0, i1, m, s, e):
    """Rows i0..i1-1 of softmax / log_softmax with the block held column by column: e[j * r + k]
    is row i0 + k's element j (r = i1 - i0).  Each row's max, exponentials and sum are the same
    operations in the same order as one row at a time (the same bits), but every loop runs across
    rows, so the max, the exps and the sum vectorize (the division is done while copying back to
    rows, which saved a pass over the block: 172 -> 157 us): on attention's 2048 rows
    of 32 float32, softmax went from 232 to 157 us and log_softmax from 225 to 138 us, where one
    serial add chain and one branchy max per row dominated.  (The backwards' single sums did
    not pay for the transpose: they stay row by row.)
    The numpy error model keeps a division from checking its divisor per element."""
    nclass = x.shape[1]
    r = i1 - i0
    for k in range(r):
        for j in range(nclass):
            e[j * r + k] = np.float64(x[i0 + k, j])
    for k in range(r):
        m[k] = -np.inf
        s[k] = 0.0
    for j in range(nclass):
        b = j * r
        for k in range(r):
            v = e[b + k]
            mk = m[k]
            m[k] = v if (v > mk or v != v) else mk     # a NaN sticks: the row is NaN, as PyTorch's
    for j in range(nclass):
        b = j * r
        for k in range(r):
            e[b + k] = _exp(e[b + k] - m[k])
    for j in range(nclass):
        b = j * r
        for k in range(r):
            s[k] += e[b + k]
    if log:
        for k in range(r):
            s[k] = math.log(s[k])
        for k in range(r):
            for j in range(nclass):
                out[i0 + k, j] = (np.float64(x[i0 + k, j]) - m[k]) - s[k]
    else:
        for k in range(r):
            sk = s[k]
            for j in range(nclass):
                out[i0 + k, j] = e[j * r + k] / sk


# fewer rows than this per block (rows longer than _BLOCK / 8): one row at a time, the column
# layout's loops across rows would be too short to pay for its two transposes
_MIN_COLUMNS = 8


@numba.njit(boundscheck=False)
def _softmax_by_row(x, out, log, i0, i1, m, e):
    """Rows i0..i1-1 of softmax / log_softmax one row at a time (``_softmax_columns`` gives the
    same bits)."""
    nclass = x.shape[1]
    _shifted_exps(x, i0, i1, m, e)
    for i in range(i0, i1):
        b = (i - i0) * nclass
        s = 0.0
        for j in range(nclass):
            s += e[b + j]
        if log:
            ls = math.log(s)
            for j in range(nclass):
                out[i, j] = (np.float64(x[i, j]) - m[i - i0]) - ls
        else:
            for j in range(nclass):
                out[i, j] = e[b + j] / s


@numba.njit(boundscheck=False)
def _softmax_rows(x, out, log):
    """softmax (``log`` False) or log_softmax (True) of each row of ``x`` into ``out``."""
    n, nclass = x.shape
    per, m, e = _block_scratch(nclass)
    s = np.empty(per)
    for i0 in range(0, n, per):
        i1 = min(i0 + per, n)
        if per >= _MIN_COLUMNS:
            _softmax_columns(x, out, log, i0, i1, m, s, e)
        else:
            _softmax_by_row(x, out, log, i0, i1, m, e)


@numba.njit(boundscheck=False)
def _rows_by_dtype(x, out, log):
    """float32 rows: rows32.py's float32 evaluation; float64 rows: ``_softmax_rows``.  (A plain
    branch, not an overload: the disk cache's fingerprint follows calls, not overload tables.)"""
    if x.itemsize == 4:
        softmax_rows32(x, out, log)
    else:
        _softmax_rows(x, out, log)


@numba.njit(boundscheck=False)
def softmax(x, out):
    _rows_by_dtype(x, out, False)


@numba.njit(boundscheck=False)
def log_softmax(x, out):
    _rows_by_dtype(x, out, True)


@numba.njit(boundscheck=False)
def softmax_backward(g, y, out):
    """PyTorch's _softmax_backward_data: y * (g - sum(g * y)), eight rows at a time (rows_bwd.py)."""
    softmax_backward_rows(g, y, out)


@numba.njit(boundscheck=False)
def log_softmax_backward(g, y, out):
    """PyTorch's _log_softmax_backward_data: g - exp(y) * sum(g); exp(y) in blocks of rows, one
    flat (vectorizing) loop each, as ``_shifted_exps``."""
    n, nclass = g.shape
    per, _, e = _block_scratch(nclass)
    for i0 in range(0, n, per):
        i1 = min(i0 + per, n)
        for i in range(i0, i1):
            for j in range(nclass):
                e[(i - i0) * nclass + j] = np.float64(y[i, j])
        for q in range((i1 - i0) * nclass):
            e[q] = _exp(e[q])
        for i in range(i0, i1):
            s = 0.0
            for j in range(nclass):
                s += np.float64(g[i, j])
            for j in range(nclass):
                out[i, j] = np.float64(g[i, j]) - e[(i - i0) * nclass + j] * s


@numba.njit(boundscheck=False)
def check_targets(t, nclass, ignore_index):
    """The first target that is neither a class index nor ``ignore_index``, as (row, value); row -1 if none."""
    for i in range(t.shape[0]):
        c = t[i]
        if c != ignore_index and (c < 0 or c >= nclass):
            return i, c
    return -1, 0


@numba.njit(boundscheck=False)
def nll_loss(x, t, w, ignore_index, rows):
    """Over log-probabilities ``x`` (N, C): writes -w[t_i] * x[i, t_i] into ``rows`` (0 where
    t_i == ignore_index) and returns (sum of rows, sum of the weights w[t_i] counted); ``w`` is
    empty for no weight.  A target out of range: returns (0, 0, row) before writing anything."""
    bad, _ = check_targets(t, x.shape[1], ignore_index)
    if bad >= 0:
        return 0.0, 0.0, bad
    has_w = w.shape[0] > 0
    total = 0.0
    wsum = 0.0
    for i in range(x.shape[0]):
        c = t[i]
        if c == ignore_index:
            rows[i] = 0.0
            continue
        wc = np.float64(w[c]) if has_w else 1.0
        r = -wc * np.float64(x[i, c])
        rows[i] = r
        total += r
        wsum += wc
    return total, wsum, -1


@numba.njit(boundscheck=False)
def nll_loss_backward(g, gstep, div, t, w, ignore_index, out):
    """d nll / d x: -w[t_i] * g_i / div at (i, t_i), 0 elsewhere; ``g`` is one value per row
    (gstep 1) or one for all (gstep 0)."""
    has_w = w.shape[0] > 0
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = 0.0
        c = t[i]
        if c == ignore_index:
            continue
        wc = np.float64(w[c]) if has_w else 1.0
        out[i, c] = -wc * np.float64(g[i * gstep]) / div


@numba.njit(boundscheck=False)
def _loss_row(x, i, c, mi, ls, w, eps):
    """Row i's cross-entropy, -sum_j q_ij log_softmax(x_i)_j, q_ij = (1 - eps) w[t_i] [j == t_i]
    + eps / C w_j (PyTorch's nll and smoothing terms), from its max ``mi`` and log-sum-exp ``ls``
    about it; returns (loss, w[t_i])."""
    nclass = x.shape[1]
    has_w = w.shape[0] > 0
    wc = np.float64(w[c]) if has_w else 1.0
    r = -wc * ((np.float64(x[i, c]) - mi) - ls)
    if eps != 0.0:
        smooth = 0.0
        for j in range(nclass):
            wj = np.float64(w[j]) if has_w else 1.0
            smooth -= wj * ((np.float64(x[i, j]) - mi) - ls)
        r = (1.0 - eps) * r + eps / nclass * smooth
    return r, wc


@numba.njit(boundscheck=False)
def _cross_entropy64(x, t, w, ignore_index, eps, rows):
    n, nclass = x.shape
    per, m, e = _block_scratch(nclass)
    total = 0.0
    wsum = 0.0
    for i0 in range(0, n, per):
        i1 = min(i0 + per, n)
        _shifted_exps(x, i0, i1, m, e)
        for i in range(i0, i1):
            c = t[i]
            if c == ignore_index:
                rows[i] = 0.0
                continue
            s = 0.0
            for j in range(nclass):
                s += e[(i - i0) * nclass + j]
            r, wc = _loss_row(x, i, c, m[i - i0], math.log(s), w, eps)
            rows[i] = r
            total += r
            wsum += wc
    return total, wsum


@numba.njit(boundscheck=False)
def _cross_entropy32(x, t, w, ignore_index, eps, rows):
    """float32 logits: the shifted exponentials in float32 (rows32.py, as the float32 softmax),
    each row's sum in float64 lanes; the loss from them as ``_cross_entropy64``'s."""
    n, nclass = x.shape
    per, m, e = scratch32(nclass)
    total = 0.0
    wsum = 0.0
    for i0 in range(0, n, per):
        for k in range(shifted_exps32(x, i0, per, m, e)):
            loss, wc = 0.0, 0.0
            if t[i0 + k] != ignore_index:
                loss, wc = _loss_row(x, i0 + k, t[i0 + k], np.float64(m[k]), math.log(sum8(e, k * nclass, nclass)), w, eps)
            rows[i0 + k] = loss
            total += loss
            wsum += wc
    return total, wsum


@numba.njit(boundscheck=False)
def cross_entropy(x, t, w, ignore_index, eps, rows):
    """Cross-entropy of logits ``x`` (N, C) against class indices ``t``, with label smoothing
    ``eps`` (``_loss_row``); rows where t_i == ignore_index are 0.  Writes the rows and returns
    (their sum, the sum of w[t_i] over counted rows, bad row).  float32 rows take their exps in
    float32 (``_cross_entropy32``: on the GPT's 512 x 45 logits the bare kernel went 80 -> 54 us,
    its backward 93 -> 72 us, interleaved minima at load 10 on 2 cores)."""
    bad, _ = check_targets(t, x.shape[1], ignore_index)
    if bad >= 0:
        return 0.0, 0.0, bad
    if x.itemsize == 4:
        total, wsum = _cross_entropy32(x, t, w, ignore_index, eps, rows)
    else:
        total, wsum = _cross_entropy64(x, t, w, ignore_index, eps, rows)
    return total, wsum, -1


@numba.njit(boundscheck=False, error_model="numpy")
def _grad_row(out, i, c, gi, wc, big_q, qs, e, b, s, eps):
    """out[i, j] = gi * (p_j * big_q - q_ij), p_j = e[b + j] / s, q_ij = qs[j] + (1 - eps) wc
    [j == c]: the target's column is written again after the branch-free (vectorizing) loop.
    (The numpy error model: no divisor check per element; s >= 1, the max's own exp.)"""
    for j in range(out.shape[1]):
        out[i, j] = gi * ((np.float64(e[b + j]) / s) * big_q - qs[j])
    out[i, c] = gi * ((np.float64(e[b + c]) / s) * big_q - (qs[c] + (1.0 - eps) * wc))


@numba.njit(boundscheck=False)
def _smoothing(w, nclass, eps):
    """(eps / C * w_j per class, 0 without smoothing; their sum's w part: sum_j w_j)."""
    has_w = w.shape[0] > 0
    qs = np.zeros(nclass)
    wall = 0.0
    if eps != 0.0:
        for j in range(nclass):
            wj = np.float64(w[j]) if has_w else 1.0
            wall += wj
            qs[j] = eps / nclass * wj
    return qs, wall


@numba.njit(boundscheck=False)
def _row_scale(g, gstep, div, i, c, w, eps, wall, nclass):
    """(g_i / div, w[t_i], sum_k q_ik) of row i."""
    wc = np.float64(w[c]) if w.shape[0] > 0 else 1.0
    return np.float64(g[i * gstep]) / div, wc, (1.0 - eps) * wc + eps / nclass * wall


@numba.njit(boundscheck=False)
def _cross_entropy_backward64(g, gstep, div, x, t, w, ignore_index, eps, qs, wall, out):
    n, nclass = x.shape
    per, m, e = _block_scratch(nclass)
    for i0 in range(0, n, per):
        i1 = min(i0 + per, n)
        _shifted_exps(x, i0, i1, m, e)
        for i in range(i0, i1):
            b = (i - i0) * nclass
            if t[i] == ignore_index:
                out[i, :] = 0.0
                continue
            s = 0.0
            for j in range(nclass):
                s += e[b + j]
            gi, wc, big_q = _row_scale(g, gstep, div, i, t[i], w, eps, wall, nclass)
            _grad_row(out, i, t[i], gi, wc, big_q, qs, e, b, s, eps)


@numba.njit(boundscheck=False)
def _cross_entropy_backward32(g, gstep, div, x, t, w, ignore_index, eps, qs, wall, out):
    n, nclass = x.shape
    per, m, e = scratch32(nclass)
    for i0 in range(0, n, per):
        for k in range(shifted_exps32(x, i0, per, m, e)):
            i, c = i0 + k, t[i0 + k]
            if c == ignore_index:
                out[i, :] = 0.0
            else:
                gi, wc, big_q = _row_scale(g, gstep, div, i, c, w, eps, wall, nclass)
                _grad_row(out, i, c, gi, wc, big_q, qs, e, k * nclass, sum8(e, k * nclass, nclass), eps)


@numba.njit(boundscheck=False)
def cross_entropy_backward(g, gstep, div, x, t, w, ignore_index, eps, out):
    """d cross_entropy / d x: (g_i / div) * (softmax(x_i)_j * sum_k q_ik - q_ij); float32 rows
    from the forward's float32 exponentials (``_cross_entropy32``)."""
    qs, wall = _smoothing(w, x.shape[1], eps)
    if x.itemsize == 4:
        _cross_entropy_backward32(g, gstep, div, x, t, w, ignore_index, eps, qs, wall, out)
    else:
        _cross_entropy_backward64(g, gstep, div, x, t, w, ignore_index, eps, qs, wall, out)


@numba.njit(boundscheck=False)
def column_sum(g, out):
    """out[j] = the sum of column j of ``g`` (N, C), one float64 accumulator per column, rows in
    order: linear's bias gradient.  np.add.reduce(g, 0, float64) took 29 us on 512 x 64 float32
    (a cast buffer and a strided reduction), this loop 3 us: it vectorizes across the columns."""
    acc = np.zeros(g.shape[1])
    for i in range(g.shape[0]):
        for j in range(g.shape[1]):
            acc[j] += g[i, j]
    for j in range(g.shape[1]):
        out[j] = acc[j]


@numba.njit(boundscheck=False)
def add_bias(out, b):
    """out[i, j] += b[j]: linear's bias, one float add per element as NumPy's ``out += b`` does
    (the same bits); 2 us on 512 x 64 float32 where NumPy's broadcasting add took 5 us."""
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] += b[j]


_F = {"softmax": softmax, "log_softmax": log_softmax, "softmax_backward": softmax_backward,
      "log_softmax_backward": log_softmax_backward, "nll_loss": nll_loss, "nll_loss_backward": nll_loss_backward,
      "cross_entropy": cross_entropy, "cross_entropy_backward": cross_entropy_backward,
      "column_sum": column_sum, "add_bias": add_bias}


def _sig(name: str, dt) -> tuple:
    """The one Numba signature each kernel compiles for, per dtype: C-contiguous arrays."""
    f = numba.from_dtype(dt)
    m2, v = nbt.Array(f, 2, "C"), nbt.Array(f, 1, "C")
    i64, f64 = nbt.int64, nbt.float64
    t, g = nbt.Array(nbt.int64, 1, "C"), v
    return {"softmax": (m2, m2), "log_softmax": (m2, m2), "softmax_backward": (m2, m2, m2),
            "log_softmax_backward": (m2, m2, m2), "nll_loss": (m2, t, v, i64, nbt.Array(nbt.float64, 1, "C")),
            "nll_loss_backward": (g, i64, f64, t, v, i64, m2),
            "cross_entropy": (m2, t, v, i64, f64, nbt.Array(nbt.float64, 1, "C")),
            "cross_entropy_backward": (g, i64, f64, m2, t, v, i64, f64, m2), "column_sum": (m2, v), "add_bias": (m2, v)}[name]


_ENTRY = cache.entries(_KIND)   # (name, dtype) -> entry point


def get(name: str, dtype):
    """The compiled entry point of kernel ``name`` for arrays of ``dtype`` (float32 or float64)."""
    key = (name, np.dtype(dtype))
    ep = _ENTRY.get(key)
    if ep is None:
        ep = cache.njit_function(_KIND, key, name, _F[name], _sig(name, key[1]))
    return ep


def compiled_signatures() -> dict[str, list[str]]:
    """Kernel name -> the signatures compiled so far."""
    return cache.signatures(_KIND)
