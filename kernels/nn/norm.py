"""layer_norm as one op forward and one backward: ``_layer_norm`` and ``_layer_norm_backward``.

``F.layer_norm`` was nine elementwise and reduction ops forward (mean, sub, mul, mean, add, rsqrt,
mul, mul, add) and about twenty backward, each a dispatch and a pass over the tensor.  Here the
CPU runs one loop per row each way (float32 and float64; statistics in float64, two passes
for the variance, the sums in vector lanes; one rounding per output; rows 16 at a time, the
block's statistics first), the row's mean and 1/std recomputed by the backward
from the saved input (cheaper than saving and dispatching them).  Other dtypes and CUDA run the
same formulas written with other ops (below the autograd keys: one node), as do double backward
(``create_graph=True``: the formulas are recorded).  Rows are serial: a row's result never
depends on the thread count.

The weight's and bias's gradients are summed over rows in float64, row order, one rounding.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import types as nbt

from dispatch_jit import bf16
from dispatch_jit.autograd.grad_mode import is_grad_enabled
from dispatch_jit.autograd.kernel import AutogradKernel, Derivative, Grad
from dispatch_jit.creation import empty
from dispatch_jit.jit import cache
from dispatch_jit.ops import entries
from dispatch_jit.tensor import wrap

from .op import below_autograd

__all__ = ["SCHEMAS", "KERNELS", "get", "layer_norm_formula", "layer_norm_backward_formula"]

A = entries("aten")
SCHEMAS = [
    "_layer_norm(Tensor input, int ndims, Tensor? weight=None, Tensor? bias=None, float eps=1e-05) -> Tensor",
    "_layer_norm_backward(Tensor grad_out, Tensor input, int ndims, Tensor? weight, float eps, "
    "bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
]
_KIND = "nn"
_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


# -- the formulas with ops (CUDA, other dtypes, double backward) -----------------------------------
def _stats(x, axes, eps):
    centered = A.sub(x, A.mean(x, axes, True))
    return centered, A.rsqrt(A.add(A.mean(A.mul(centered, centered), axes, True), eps))


def layer_norm_formula(x, ndims, weight, bias, eps):
    """F.layer_norm's composition: (x - mean) / sqrt(var + eps) * weight + bias."""
    axes = tuple(range(x.ndim - ndims, x.ndim))
    centered, rstd = _stats(x, axes, eps)
    out = A.mul(centered, rstd)
    if weight is not None:
        out = A.mul(out, weight)
    if bias is not None:
        out = A.add(out, bias)
    return out


def layer_norm_backward_formula(g, x, ndims, weight, eps, output_mask):
    """(grad of input, of weight, of bias): gi = rstd (gx - mean(gx) - xhat mean(gx xhat)), gx = g w."""
    axes = tuple(range(x.ndim - ndims, x.ndim))
    batch = tuple(range(x.ndim - ndims))
    centered, rstd = _stats(x, axes, eps)
    xhat = A.mul(centered, rstd)
    gx = A.mul(g, weight) if weight is not None else g
    gi = gw = gb = None
    if output_mask[0]:
        gi = A.mul(rstd, A.sub(A.sub(gx, A.mean(gx, axes, True)), A.mul(xhat, A.mean(A.mul(gx, xhat), axes, True))))
    if output_mask[1]:
        gw = A.sum(A.mul(g, xhat), batch) if batch else A.mul(g, xhat)
    if output_mask[2]:
        gb = A.sum(g, batch) if batch else g
    none = empty(0, dtype=x.dtype, device=x.device)
    return tuple(t if t is not None else none for t in (gi, gw, gb))


_forward_below = below_autograd(layer_norm_formula)
_backward_below = below_autograd(layer_norm_backward_formula)


# -- the CPU loops ------------------------------------------------------------------------------------
# Rows are taken _BLOCK at a time: each row's sums are the same loop as one row at a time (the
# same bits), but a block's rows are independent chains the core overlaps, and the square roots
# and divisions of 1/std run as one vector loop across the block.  One row at a time, each row
# was a serial chain (sum, mean, sum of squares, sqrt, divide) of short loops: on the GPT's
# 512 rows of 64 float32 the forward loop took 23.9 us, blocked 18.7.
_BLOCK = 16


# reassoc: the row sums vectorize (lanes summed in a fixed order: the same bits every call)
@numba.njit(boundscheck=False, fastmath={"reassoc"})
def _block_stats(x, i0, i1, eps, mean, rstd):
    """mean[k] and rstd[k] = 1 / sqrt(var + eps) of row i0 + k, k < i1 - i0 (float64 sums,
    two passes for the variance)."""
    n = x.shape[1]
    for i in range(i0, i1):
        s = 0.0
        for j in range(n):
            s += np.float64(x[i, j])
        mean[i - i0] = s / n
    for i in range(i0, i1):
        m = mean[i - i0]
        v = 0.0
        for j in range(n):
            d = np.float64(x[i, j]) - m
            v += d * d
        rstd[i - i0] = v
    for k in range(i1 - i0):
        rstd[k] = 1.0 / math.sqrt(rstd[k] / n + eps)


@numba.njit(boundscheck=False)
def _forward(x, w, b, eps, out):
    """out = (x - mean) rstd w + b per row; ``w``/``b`` empty where absent."""
    n = x.shape[1]
    hw, hb = w.size > 0, b.size > 0
    mean, rstd = np.empty(_BLOCK), np.empty(_BLOCK)
    for i0 in range(0, x.shape[0], _BLOCK):
        i1 = min(i0 + _BLOCK, x.shape[0])
        _block_stats(x, i0, i1, eps, mean, rstd)
        for i in range(i0, i1):
            m, r = mean[i - i0], rstd[i - i0]
            if hw and hb:           # the usual case, one straight loop
                for j in range(n):
                    out[i, j] = (np.float64(x[i, j]) - m) * r * np.float64(w[j]) + np.float64(b[j])
                continue
            for j in range(n):
                y = (np.float64(x[i, j]) - m) * r
                if hw:
                    y = y * np.float64(w[j])
                if hb:
                    y = y + np.float64(b[j])
                out[i, j] = y


# Each row's normalized input and weighted gradient go once into float64 scratch rows; the sums a
# and c are a loop of their own that reads only those rows and stores nothing.  A reduction loop
# that also stores (the gw/gb updates used to share it) vectorizes behind LLVM's runtime overlap
# check, and where the check fails it runs the scalar loop: other bits from the same inputs,
# depending on where the arrays happened to lie (float64 inputs of one row gave different gi from
# run to run).  A store-free reduction has one path.  On the GPT's 512 rows of 64 float32,
# 44.0 -> 37.3-39.0 us (minima over interleaved rounds, load 6).  The float32 results keep their
# bits; float64 input gradients move in the last bits (eager and compiled call this same loop).
@numba.njit(boundscheck=False, fastmath={"reassoc"})
def _backward(g, x, w, eps, want_i, gi, gw, gb):
    """gi per row; gw, gb (float64, zeroed by the caller) summed over rows."""
    n = x.shape[1]
    mean, rstd = np.empty(_BLOCK), np.empty(_BLOCK)
    xh, gx, wd = np.empty(n), np.empty(n), np.ones(n)
    if w.size > 0:
        for j in range(n):
            wd[j] = np.float64(w[j])
    for i0 in range(0, x.shape[0], _BLOCK):
        i1 = min(i0 + _BLOCK, x.shape[0])
        _block_stats(x, i0, i1, eps, mean, rstd)
        for i in range(i0, i1):
            m, r = mean[i - i0], rstd[i - i0]
            for j in range(n):
                gj, h = np.float64(g[i, j]), (np.float64(x[i, j]) - m) * r
                xh[j] = h
                gx[j] = gj * wd[j]
                gw[j] += gj * h
                gb[j] += gj
            if want_i:
                a = 0.0
                c = 0.0
                for j in range(n):
                    a += gx[j]
                    c += gx[j] * xh[j]
                a /= n
                c /= n
                for j in range(n):
                    gi[i, j] = r * (gx[j] - a - xh[j] * c)


def _sig(name, dt):
    f = numba.from_dtype(dt)
    m2, v, f64v = nbt.Array(f, 2, "C"), nbt.Array(f, 1, "C"), nbt.Array(nbt.float64, 1, "C")
    if name == "layer_norm":
        return (m2, v, v, nbt.float64, m2)
    return (m2, m2, v, nbt.float64, nbt.boolean, m2, f64v, f64v)


_F = {"layer_norm": _forward, "layer_norm_backward": _backward}
_ENTRY = cache.entries(_KIND)


def get(name, dt):
    """The compiled loop ``name`` ("layer_norm": (rows, w, b, eps, out); "layer_norm_backward":
    (g_rows, rows, w, eps, want_input_grad, gi, gw, gb), gw and gb float64 zeros) for ``dt``;
    an absent weight or bias is an empty array.  A compiled plan that calls these computes eager's bits."""
    key = (name, dt)
    ep = _ENTRY.get(key)
    if ep is None:
        ep = cache.njit_function(_KIND, key, name, _F[name], _sig(name, dt))
    return ep


def _loops(x, ndims, *params) -> bool:
    """The CPU loops' case: a float32/float64 input, the weight and bias of its dtype and of the
    normalized shape (or absent); a weight that broadcasts to it takes the formulas."""
    dt, pshape = x._data.dtype, tuple(x.shape[x.ndim - ndims:])
    return dt in _DTYPES and all(p is None or (p._data.dtype == dt and tuple(p.shape) == pshape) for p in params)


def _flat(p, dt):
    return np.empty(0, dt) if p is None else np.ascontiguousarray(p._data).reshape(-1)


def _rows(a, ndims):
    # math.prod of the shape tuple: np.prod costs ~2 us a call, twice per backward
    n = math.prod(a.shape[a.ndim - ndims:])
    return np.ascontiguousarray(a).reshape(-1, n) if n else a.reshape(-1, 0)


def layer_norm_cpu(x, ndims, weight=None, bias=None, eps=1e-5):
    if not _loops(x, ndims, weight, bias) or x._data.size == 0:
        return _forward_below(x, ndims, weight, bias, eps)
    a = x._data
    rows = _rows(a, ndims)
    out = np.empty(rows.shape, a.dtype)
    get("layer_norm", a.dtype)(rows, _flat(weight, a.dtype), _flat(bias, a.dtype), float(eps), out)
    return wrap(out.reshape(a.shape))


def layer_norm_backward_cpu(g, x, ndims, weight, eps, output_mask):
    if not _loops(x, ndims, weight) or g.dtype != x.dtype or x._data.size == 0 or tuple(g.shape) != tuple(x.shape):
        return _backward_below(g, x, ndims, weight, eps, output_mask)
    a, dt = x._data, x._data.dtype
    rows = _rows(a, ndims)
    gi = np.empty(a.shape, dt) if output_mask[0] else np.empty((0, 0), dt)
    sums = np.zeros((2, rows.shape[1]))     # the weight's and the bias's float64 sums
    get("layer_norm_backward", dt)(_rows(g._data, ndims), rows, _flat(weight, dt), float(eps), bool(output_mask[0]),
                                    gi.reshape(rows.shape) if output_mask[0] else gi, sums[0], sums[1])
    pshape = a.shape[a.ndim - ndims:]
    none = np.empty(0, dt)
    return (wrap(gi if output_mask[0] else none),
            wrap(sums[0].astype(dt).reshape(pshape) if output_mask[1] else none),
            wrap(sums[1].astype(dt).reshape(pshape) if output_mask[2] else none))


def layer_norm_meta(x, ndims, weight=None, bias=None, eps=1e-5):
    if _loops(x, ndims, weight, bias) and 0 not in tuple(x.shape):
        return empty(*tuple(x.shape), dtype=x.dtype, device=x.device)
    return _forward_below(x, ndims, weight, bias, eps)


def layer_norm_backward_meta(g, x, ndims, weight, eps, output_mask):
    if _loops(x, ndims, weight) and g.dtype == x.dtype and tuple(g.shape) == tuple(x.shape) and 0 not in tuple(x.shape):
        p = tuple(x.shape[x.ndim - ndims:])
        return tuple(empty(*(s if m else (0,)), dtype=x.dtype, device=x.device)
                     for s, m in zip((tuple(x.shape), p, p), output_mask))
    return _backward_below(g, x, ndims, weight, eps, output_mask)


# -- the derivative: one _layer_norm_backward call gives all three gradients; each Grad takes its
# own (kept in the node's ctx, keyed by the gradient it was computed from, until its Grad asks)
def _grad(k: int):
    def grad(g, s, c):
        x, w = s["input"], s["weight"]
        if is_grad_enabled():      # create_graph: the recorded formulas
            mask = tuple(i == k for i in range(3))
            return layer_norm_backward_formula(g, x, c["ndims"], w, c["eps"], mask)[k]
        kept = c.get("_ln_grads")
        if kept is None or kept[0] is not g or kept[1][k] is None:
            mask = (True, w is not None, c["shapes"][2] is not None)
            kept = (g, list(A._layer_norm_backward(g, x, c["ndims"], w, c["eps"], mask)))
            c["_ln_grads"] = kept
        out, kept[1][k] = kept[1][k], None
        return out
    return grad


DERIVATIVES = {"_layer_norm": Derivative("NativeLayerNormBackward", (
    Grad(_grad(0), ("input", "weight")), Grad(_grad(1), ("input", "weight")), Grad(_grad(2), ("input", "weight"))))}

KERNELS = {"CPU": {"_layer_norm": layer_norm_cpu, "_layer_norm_backward": layer_norm_backward_cpu},
           "CUDA": {"_layer_norm": _forward_below, "_layer_norm_backward": _backward_below},
           "Meta": {"_layer_norm": layer_norm_meta, "_layer_norm_backward": layer_norm_backward_meta},
           "Autograd": {name: AutogradKernel(d) for name, d in DERIVATIVES.items()}}

# float16 and bfloat16 reach the formulas (their ops widen to float32 and round once)
bf16.support("aten::_layer_norm", "aten::_layer_norm_backward", keys=("CPU",))
