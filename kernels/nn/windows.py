"""CPU loops of the sliding-window ops (convolution and pooling) over NumPy arrays, all in the
2-D layout (N, C, H, W): a 1-D op runs with H = 1.  Inputs arrive C-contiguous; convolution's
input arrives already zero-padded (op code pads it with NumPy), pooling pads implicitly.

- ``im2col``/``col2im``: a group of a convolution as one BLAS product (conv.py).  The column
  matrix is (Cg*kh*kw, N*L), L = oh*ow: one product per group over the whole batch, so BLAS sees
  a long, cache-friendly N*L dimension; col2im is im2col's adjoint (a scatter-add: the gradient
  of the padded input).
- ``max_pool``/``max_pool_backward``: the window's max (a NaN wins, the last one, as PyTorch's
  CPU kernel: ``val > max or isnan(val)``), with its flat index h*W + w in the unpadded plane; the
  backward recomputes that index from the input and adds the gradient there (no index tensor
  kept between forward and backward).
- ``avg_pool``/``avg_pool_backward``: PyTorch's divisor rule (the window clipped to the padded
  plane with count_include_pad, to the plane without it, or ``divisor_override``); ``avg_pool_int``
  the int64 form (an int64 sum divided truncating, as PyTorch's).

Planes are independent, so the pooling loops run ``prange`` over them (a plane's result never
depends on the thread count).  im2col/col2im stay serial: each sits between two BLAS calls, and
a Numba thread pool waking while OpenBLAS's threads still spin slows both (kernels/linalg/cpu.py
measured 25x on small products; here the parallel copy gained nothing on the loaded 2-core
machine).  Every floating sum accumulates in float64.  Outputs
are allocated by the caller and passed in; ``get(name, dtype)`` compiles once per dtype through
the compile cache (kind "nn_windows").

>>> import numpy as np
>>> x = np.arange(4.0).reshape(1, 1, 2, 2); out = np.empty((1, 1, 1, 1)); idx = np.empty((1, 1, 1, 1), np.int64)
>>> get("max_pool", x.dtype)(x, 2, 2, 2, 2, 0, 0, 1, 1, out, idx, np.array([-np.inf]))
>>> float(out[0, 0, 0, 0]), int(idx[0, 0, 0, 0])
(3.0, 3)
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types as nbt

from dispatch_jit.jit import cache

__all__ = ["get", "DTYPES"]

_KIND = "nn_windows"
DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


@numba.njit(boundscheck=False)
def im2col(xp, kh, kw, sh, sw, dh, dw, c0, oh, ow, cols):
    """cols[(c*kh + i)*kw + j, n*L + y*ow + x] = xp[n, c0 + c, y*sh + i*dh, x*sw + j*dw].  The unit
    stride's row copy is its own loop: contiguous on both sides, it vectorizes (1.6x on the benchmark)."""
    n_, cg = xp.shape[0], cols.shape[0] // (kh * kw)
    L = oh * ow
    for r in range(cg * kh * kw):
        c = r // (kh * kw)
        i = (r - c * kh * kw) // kw
        j = r - c * kh * kw - i * kw
        q0 = j * dw
        for n in range(n_):
            base = n * L
            for y in range(oh):
                src = xp[n, c0 + c, y * sh + i * dh]
                dst = cols[r, base + y * ow: base + y * ow + ow]
                if sw == 1:
                    for x in range(ow):
                        dst[x] = src[q0 + x]
                else:
                    for x in range(ow):
                        dst[x] = src[q0 + x * sw]


@numba.njit(boundscheck=False)
def col2im(cols, kh, kw, sh, sw, dh, dw, c0, oh, ow, gxp):
    """gxp[n, c0 + c, ...] += im2col's adjoint of ``cols`` (each channel's taps summed in a fixed
    order: the result does not depend on the thread count)."""
    n_, cg = gxp.shape[0], cols.shape[0] // (kh * kw)
    L = oh * ow
    for c in range(cg):
        for i in range(kh):
            for j in range(kw):
                r = (c * kh + i) * kw + j
                q0 = j * dw
                for n in range(n_):
                    base = n * L
                    for y in range(oh):
                        dst = gxp[n, c0 + c, y * sh + i * dh]
                        src = cols[r, base + y * ow: base + y * ow + ow]
                        if sw == 1:
                            for x in range(ow):
                                dst[q0 + x] += src[x]
                        else:
                            for x in range(ow):
                                dst[q0 + x * sw] += src[x]


@numba.njit(boundscheck=False)
def _window_max(x, n, c, y, xo, kh, kw, sh, sw, ph, pw, dh, dw, lowest):
    """(max, flat position in the plane) of output (y, xo)'s window: the first maximum, a NaN
    winning (the last NaN seen); (``lowest``, -1) when the window misses the plane.  Compared in
    the input's own dtype (an int64 above 2**53 would round in float64).  max_pool's forward and
    its backward (which finds the argmax again) share it, so both pick the same element."""
    h_, w_ = x.shape[2], x.shape[3]
    best, at = lowest, -1
    for i in range(kh):
        r = y * sh - ph + i * dh
        if r < 0 or r >= h_:
            continue
        for j in range(kw):
            q = xo * sw - pw + j * dw
            if q < 0 or q >= w_:
                continue
            v = x[n, c, r, q]
            if v > best or v != v or at < 0:
                best, at = v, r * w_ + q
    return best, at


@numba.njit(boundscheck=False, parallel=True)
def max_pool(x, kh, kw, sh, sw, ph, pw, dh, dw, out, idx, lowest):
    """``lowest`` (a 1-element array of x's dtype): -inf, or an integer dtype's minimum, as
    PyTorch's; what a window that misses the plane gives."""
    n_, c_, h_, w_ = x.shape
    oh, ow = out.shape[2], out.shape[3]
    for p in numba.prange(n_ * c_):
        n = p // c_
        c = p - n * c_
        for y in range(oh):
            for xo in range(ow):
                best, at = _window_max(x, n, c, y, xo, kh, kw, sh, sw, ph, pw, dh, dw, lowest[0])
                out[n, c, y, xo] = best
                idx[n, c, y, xo] = at


@numba.njit(boundscheck=False, parallel=True)
def max_pool_backward(g, x, kh, kw, sh, sw, ph, pw, dh, dw, gx, lowest):
    n_, c_, h_, w_ = x.shape
    oh, ow = g.shape[2], g.shape[3]
    for p in numba.prange(n_ * c_):
        n = p // c_
        c = p - n * c_
        for y in range(oh):
            for xo in range(ow):
                best, at = _window_max(x, n, c, y, xo, kh, kw, sh, sw, ph, pw, dh, dw, lowest[0])
                if at >= 0:
                    r = at // w_
                    q = at - r * w_
                    gx[n, c, r, q] += g[n, c, y, xo]


@numba.njit(boundscheck=False)
def _avg_window(y, xo, kh, kw, sh, sw, ph, pw, h_, w_, include_pad, divisor):
    """(rows, cols and the divisor of output (y, xo)'s window), PyTorch's avg_pool2d rule."""
    r0, q0 = y * sh - ph, xo * sw - pw
    r1, q1 = min(r0 + kh, h_ + ph), min(q0 + kw, w_ + pw)
    size = (r1 - r0) * (q1 - q0)
    r0, q0, r1, q1 = max(r0, 0), max(q0, 0), min(r1, h_), min(q1, w_)
    if divisor != 0:   # divisor_override, negative ones included (PyTorch divides by it as given)
        d = divisor
    elif include_pad:
        d = size
    else:
        d = (r1 - r0) * (q1 - q0)
    return r0, r1, q0, q1, d


@numba.njit(boundscheck=False, parallel=True)
def avg_pool(x, kh, kw, sh, sw, ph, pw, include_pad, divisor, out):
    n_, c_, h_, w_ = x.shape
    oh, ow = out.shape[2], out.shape[3]
    for p in numba.prange(n_ * c_):
        n = p // c_
        c = p - n * c_
        for y in range(oh):
            for xo in range(ow):
                r0, r1, q0, q1, d = _avg_window(y, xo, kh, kw, sh, sw, ph, pw, h_, w_, include_pad, divisor)
                s = 0.0
                for r in range(r0, r1):
                    for q in range(q0, q1):
                        s += x[n, c, r, q]
                out[n, c, y, xo] = s / d if d != 0 else np.nan


@numba.njit(boundscheck=False, parallel=True)
def avg_pool_backward(g, kh, kw, sh, sw, ph, pw, include_pad, divisor, gx):
    n_, c_, h_, w_ = gx.shape
    oh, ow = g.shape[2], g.shape[3]
    for p in numba.prange(n_ * c_):
        n = p // c_
        c = p - n * c_
        for y in range(oh):
            for xo in range(ow):
                r0, r1, q0, q1, d = _avg_window(y, xo, kh, kw, sh, sw, ph, pw, h_, w_, include_pad, divisor)
                v = np.float64(g[n, c, y, xo]) / d if d != 0 else np.nan
                for r in range(r0, r1):
                    for q in range(q0, q1):
                        gx[n, c, r, q] += v


@numba.njit(boundscheck=False, parallel=True)
def avg_pool_int(x, kh, kw, sh, sw, ph, pw, include_pad, divisor, out):
    """avg_pool of an integer input, as PyTorch's CPU kernel: the window's sum in int64 (wrapping),
    divided by the divisor truncating toward zero (C++'s integer division)."""
    n_, c_, h_, w_ = x.shape
    oh, ow = out.shape[2], out.shape[3]
    for p in numba.prange(n_ * c_):
        n = p // c_
        c = p - n * c_
        for y in range(oh):
            for xo in range(ow):
                r0, r1, q0, q1, d = _avg_window(y, xo, kh, kw, sh, sw, ph, pw, h_, w_, include_pad, divisor)
                s = np.int64(0)
                for r in range(r0, r1):
                    for q in range(q0, q1):
                        s += np.int64(x[n, c, r, q])
                t = abs(s) // abs(d)
                out[n, c, y, xo] = -t if (s < 0) != (d < 0) else t


_F = {"im2col": im2col, "col2im": col2im, "max_pool": max_pool, "max_pool_backward": max_pool_backward,
      "avg_pool": avg_pool, "avg_pool_backward": avg_pool_backward, "avg_pool_int": avg_pool_int}


def _sig(name: str, dt) -> tuple:
    """The one Numba signature each loop compiles for, per dtype."""
    a4, a2 = nbt.Array(numba.from_dtype(dt), 4, "C"), nbt.Array(numba.from_dtype(dt), 2, "C")
    a1 = nbt.Array(numba.from_dtype(dt), 1, "C")
    i, b = nbt.int64, nbt.boolean
    win = (i,) * 6
    return {"im2col": (a4,) + win + (i, i, i, a2), "col2im": (a2,) + win + (i, i, i, a4),
            "max_pool": (a4,) + win + (i, i, a4, nbt.Array(nbt.int64, 4, "C"), a1),
            "max_pool_backward": (a4, a4) + win + (i, i, a4, a1),
            "avg_pool": (a4,) + win + (b, i, a4), "avg_pool_backward": (a4,) + win + (b, i, a4),
            "avg_pool_int": (a4,) + win + (b, i, a4)}[name]


_ENTRY = cache.entries(_KIND)


def get(name: str, dtype):
    """The compiled entry point of loop ``name`` for arrays of ``dtype`` (float32 or float64; int64 for
    convolution's and avg_pool_int's loops; any integer dtype for max_pool's)."""
    key = (name, np.dtype(dtype))
    ep = _ENTRY.get(key)
    if ep is None:
        ep = cache.njit_function(_KIND, key, name, _F[name], _sig(name, key[1]))
    return ep
