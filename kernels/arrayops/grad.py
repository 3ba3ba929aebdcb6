"""Gradients of the ordering and scan ops, PyTorch's: sort's values are a gather of the input at
the sorted order (so their gradient is gather's, a scatter_add), cumsum's gradient is the
reversed cumulative sum of the output gradient, and cumprod's is its own formula below.

sort returns two tensors, which the derivative table's rows (one output) cannot describe, so its
Autograd kernel is the decomposition itself: argsort (integer, no gradient) and gather, each
recorded by its own row.  The other ops here (argsort, searchsorted, nonzero: integer results;
flip, roll, tril, triu, index_select, take, take_along_dim) have no row yet: with an input that
requires grad their outputs do not, and a backward through them names the op (kernels/__init__.py's
autograd fallback).
"""

from __future__ import annotations

from dispatch_jit.autograd.kernel import AutogradKernel, Derivative, Grad
from dispatch_jit.ops import entries

from .op import SortResult

__all__ = ["DERIVATIVES", "KERNELS"]

A = entries("aten")


def sort_autograd(x, dim=-1, descending=False, stable=False):
    idx = A.argsort(x, dim, descending, stable=stable)
    return SortResult(A.gather(x, dim, idx) if x.ndim else A.clone(x), idx)


def _reverse_cumsum(g, d: int):
    return A.flip(A.cumsum(A.flip(g, [d]), d), [d])


def _cumsum_grad(g, s, c):
    return g if g.ndim == 0 else _reverse_cumsum(g, c["dim"] % g.ndim)


def _cumprod_grad(g, s, c):
    """d out_j / d x_k = prod_{i <= j, i != k} x_i for j >= k.  Without zeros that is out_j / x_k,
    so the gradient is reverse_cumsum(g * out) / x (PyTorch's fast path).  With a zero, the
    products are formed exactly: along a new axis k, the input with x_k replaced by 1, its
    cumulative product, masked to j >= k and contracted with g (O(n^2) along ``dim``)."""
    x, out = s["self"], s["result"]
    if x.ndim == 0:
        return g
    d = c["dim"] % x.ndim
    if not A.any(A.eq(x, 0)).item():
        return A.div(_reverse_cumsum(A.mul(g, out), d), x)
    from dispatch_jit.creation import eye, ones
    from dispatch_jit.dtypes import bool_
    n = x.shape[d]
    xl = A.unsqueeze(A.transpose(x, d, -1), -2)                     # (..., 1, n_i)
    gl = A.unsqueeze(A.transpose(g, d, -1), -2)                     # (..., 1, n_j)
    excl = A.where(eye(n, dtype=bool_), ones((), dtype=x.dtype), xl)  # (..., n_k, n_i): x_k -> 1
    later = A.triu(ones(n, n, dtype=bool_))                          # [k, j]: j >= k
    prods = A.where(later, A.cumprod(excl, -1), 0)                   # [k, j]
    return A.transpose(A.sum(A.mul(prods, gl), -1), d, -1)


DERIVATIVES = {
    "cumsum": Derivative("CumsumBackward", (Grad(_cumsum_grad),), unbroadcast=False),
    "cumprod": Derivative("CumprodBackward", (Grad(_cumprod_grad, ("self", "result")),), unbroadcast=False),
}

KERNELS = {"Autograd": {"sort": sort_autograd, **{name: AutogradKernel(d) for name, d in DERIVATIVES.items()}}}
