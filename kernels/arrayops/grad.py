"""Gradients of the ordering and scan ops, PyTorch's: sort's values are a gather of the input at
the sorted order (so their gradient is gather's, a scatter_add), cumsum's gradient is the
reversed cumulative sum of the output gradient, and cumprod's is its own formula below.

sort returns two tensors, which the derivative table's rows (one output) cannot describe, so its
Autograd kernel is the decomposition itself: argsort (integer, no gradient) and gather, each
recorded by its own row.  flip, roll, tril and triu send the gradient back through themselves
(reversed, rolled back, masked); index_select, take and take_along_dim scatter_add it to where
each element was read from (repeated indices sum).  argsort, searchsorted and nonzero give integers
(no gradient).
"""

from __future__ import annotations

from dispatch_jit.autograd.kernel import AutogradKernel, Derivative, Grad
from dispatch_jit.creation import zeros
from dispatch_jit.ops import entries

from ..derivatives import _cj
from .op import ModeResult, SortResult, _int_list

__all__ = ["DERIVATIVES", "KERNELS"]

A = entries("aten")


def sort_autograd(x, dim=-1, descending=False, stable=False):
    idx = A.argsort(x, dim, descending, stable=stable)
    return SortResult(A.gather(x, dim, idx) if x.ndim else A.clone(x), idx)


def mode_autograd(x, dim=-1, keepdim=False):
    # the mode's value is a gather of the input at its index: the gradient flows to that element
    idx = A.mode(x.detach(), dim, True).indices
    if x.ndim == 0:
        return ModeResult(A.clone(x), A.reshape(idx, ()))
    values = A.gather(x, dim, idx)
    if not keepdim:
        values, idx = A.squeeze(values, dim), A.squeeze(idx, dim)
    return ModeResult(values, idx)


def _reverse_cumsum(g, d: int):
    return A.flip(A.cumsum(A.flip(g, [d]), d), [d])


def _cumsum_grad(g, s, c):
    return g if g.ndim == 0 else _reverse_cumsum(g, c["dim"] % g.ndim)


def _cumprod_grad(g, s, c):
    """d out_j / d x_k = prod_{i <= j, i != k} x_i for j >= k.  Without zeros that is out_j / x_k,
    so the gradient is reverse_cumsum(g * out) / x (PyTorch's fast path; conjugated for complex).  With a zero, the
    products are formed exactly: along a new axis k, the input with x_k replaced by 1, its
    cumulative product, masked to j >= k and contracted with g (O(n^2) along ``dim``)."""
    x, out = s["self"], s["result"]
    if x.ndim == 0:
        return g
    d = c["dim"] % x.ndim
    if not A.any(A.eq(x, 0)).item():
        return A.div(_reverse_cumsum(A.mul(g, _cj(out)), d), _cj(x))
    from dispatch_jit.creation import eye, ones
    from dispatch_jit.dtypes import bool_
    n = x.shape[d]
    xl = A.unsqueeze(A.transpose(x, d, -1), -2)                     # (..., 1, n_i)
    gl = A.unsqueeze(A.transpose(g, d, -1), -2)                     # (..., 1, n_j)
    excl = A.where(eye(n, dtype=bool_), ones((), dtype=x.dtype), xl)  # (..., n_k, n_i): x_k -> 1
    later = A.triu(ones(n, n, dtype=bool_))                          # [k, j]: j >= k
    prods = A.where(later, A.cumprod(excl, -1), 0)                   # [k, j]
    return A.transpose(A.sum(A.mul(_cj(prods), gl), -1), d, -1)


def _index_select_grad(g, s, c):
    shape = c["shapes"][0]
    if not shape:
        return g
    d = c["dim"] % len(shape)
    along = [1] * len(shape)
    along[d] = -1
    idx = A.expand(A.reshape(s["index"], along), tuple(g.shape))
    return A.scatter_add(zeros(shape, dtype=g.dtype), d, idx, g)


def _from_end(idx, n: int):
    """take's and take_along_dim's indices made non-negative (they count a negative one from the
    end; scatter_add, as PyTorch's, refuses it)."""
    return A.where(A.lt(idx, 0), A.add(idx, n), idx)


def _take_grad(g, s, c):
    shape = c["shapes"][0]
    n = 1
    for k in shape:
        n *= k
    flat = A.scatter_add(zeros(n, dtype=g.dtype), 0, A.reshape(_from_end(s["index"], n), (-1,)), A.reshape(g, (-1,)))
    return A.reshape(flat, shape)


def _take_along_dim_grad(g, s, c):
    shape, dim = c["shapes"][0], c["dim"]
    if dim is None:
        return _take_grad(g, {"index": s["indices"]}, c)
    d = dim % len(shape)
    # the result broadcast self (but along d) and the indices: scatter into self's shape broadcast the same
    # way, then the kernel sums the broadcast dimensions back
    out = list(g.shape)
    out[d] = shape[d]
    idx = A.expand(_from_end(s["indices"], shape[d]), tuple(g.shape))
    return A.scatter_add(zeros(tuple(out), dtype=g.dtype), d, idx, g)


DERIVATIVES = {
    "flip": Derivative("FlipBackward", lambda g, s, c: A.flip(g, c["dims"]), unbroadcast=False),
    "roll": Derivative("RollBackward", lambda g, s, c: A.roll(g, [-k for k in _int_list(c["shifts"])], c["dims"]),
                       unbroadcast=False),
    "tril": Derivative("TrilBackward", lambda g, s, c: A.tril(g, c["diagonal"]), unbroadcast=False),
    "triu": Derivative("TriuBackward", lambda g, s, c: A.triu(g, c["diagonal"]), unbroadcast=False),
    "index_select": Derivative("IndexSelectBackward", (Grad(_index_select_grad, ("index",)), Grad(lambda g, s, c: None)),
                               unbroadcast=False),
    "take": Derivative("TakeBackward", (Grad(_take_grad, ("index",)), Grad(lambda g, s, c: None)), unbroadcast=False),
    "take_along_dim": Derivative("TakeAlongDimBackward", (Grad(_take_along_dim_grad, ("indices",)),
                                                          Grad(lambda g, s, c: None))),
    "cumsum": Derivative("CumsumBackward", (Grad(_cumsum_grad),), unbroadcast=False),
    "cumprod": Derivative("CumprodBackward", (Grad(_cumprod_grad, ("self", "result")),), unbroadcast=False),
}

KERNELS = {"Autograd": {"sort": sort_autograd, "mode": mode_autograd, **{name: AutogradKernel(d) for name, d in DERIVATIVES.items()}}}
