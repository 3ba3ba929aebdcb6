"""The running extremes and the running log-sum-exp: ``cummax``, ``cummin`` and ``logcumsumexp``,
as PyTorch has them, a family of its own (the registration loop's ``SCHEMAS``/``KERNELS``).

The CPU kernels are NumPy's ufunc accumulations along the axis (``maximum.accumulate``,
``logaddexp.accumulate``: one pass each, in C).  A running extreme's index is the last position
at or before ``i`` whose element equals the running value there (or is NaN, once a NaN has
been seen): PyTorch's rule of updating on ``x >= best``, ties going to the later element.

Gradients: cummax/cummin's values are a gather of the input at the indices (their Autograd
kernel computes the indices without history and gathers), so the gradient goes to the element
each value came from; logcumsumexp's row is PyTorch's, in log space with the positive and
negative parts of the gradient apart, so it neither overflows nor takes the log of a negative.
Complex and CUDA inputs are not supported (the kernels are CPU only; the error names the keys).
"""

from __future__ import annotations

import numpy as np

from dispatch_jit.autograd.grad_mode import no_grad
from dispatch_jit.autograd.kernel import AutogradKernel, Derivative, Grad
from dispatch_jit.dtypes import COMPLEX, FLOAT
from dispatch_jit.errors import DTypeError
from dispatch_jit.ops import entries
from dispatch_jit.return_types import named
from dispatch_jit.tensor import wrap

from ..shape.op import normalize_axis

__all__ = ["SCHEMAS", "KERNELS", "METHODS"]

SCHEMAS = [
    "cummax(Tensor self, int dim) -> (Tensor values, Tensor indices)",
    "cummin(Tensor self, int dim) -> (Tensor values, Tensor indices)",
    "logcumsumexp(Tensor self, int dim) -> Tensor",
]
METHODS = ["cummax", "cummin", "logcumsumexp"]

A = entries("aten")
_RESULT = {"cummax": named("cummax", ("values", "indices")), "cummin": named("cummin", ("values", "indices"))}


def _extreme_indices(a: np.ndarray, axis: int, largest: bool) -> np.ndarray:
    """The index, along ``axis``, of each running maximum (minimum)'s element."""
    if a.dtype.kind == "c":
        raise DTypeError(f"{'cummax' if largest else 'cummin'}: complex values are not ordered")
    if a.shape[axis] == 0:
        return np.zeros(a.shape, np.int64)
    best = (np.maximum if largest else np.minimum).accumulate(a, axis=axis)
    hit = a == best
    if a.dtype.kind == "f":
        hit |= np.isnan(a)      # a NaN becomes (and, once seen, stays) the running value
    pos = np.arange(a.shape[axis], dtype=np.int64).reshape((-1,) + (1,) * (a.ndim - axis - 1))
    return np.maximum.accumulate(np.where(hit, pos, 0), axis=axis)


def _extreme(name: str):
    largest = name == "cummax"

    def cpu(x, dim):
        a = x._data
        axis = normalize_axis(dim, max(a.ndim, 1), name)
        if a.ndim == 0:
            return _RESULT[name](wrap(a.copy()), wrap(np.zeros((), np.int64)))
        idx = _extreme_indices(a, axis, largest)
        return _RESULT[name](wrap(np.take_along_axis(a, idx, axis)), wrap(idx))

    def autograd(x, dim):
        # the values are the input gathered at the indices: the gradient goes where each came from
        with no_grad():
            idx = getattr(A, name)(x.detach(), dim).indices
        return _RESULT[name](A.gather(x, dim, idx) if x.ndim else A.clone(x), idx)

    cpu.__name__, autograd.__name__ = f"{name}_cpu", f"{name}_autograd"
    return cpu, autograd


def logcumsumexp(x, dim):
    a = x._data
    if x.dtype.category not in (FLOAT,):
        raise DTypeError(f"logcumsumexp(): expected a floating point input, got {x.dtype.name} (PyTorch has no "
                         f"integer kernel); convert first: x.float()")
    axis = normalize_axis(dim, max(a.ndim, 1), "logcumsumexp")
    if a.ndim == 0 or a.shape[axis] == 0:
        return wrap(a.copy())
    with np.errstate(invalid="ignore"):
        return wrap(np.ascontiguousarray(np.logaddexp.accumulate(a, axis=axis)))


def _reverse_lcse(t, d: int):
    return A.flip(A.logcumsumexp(A.flip(t, [d]), d), [d])


def _logcumsumexp_grad(g, s, c):
    """grad_j = sum_{i >= j} g_i * exp(x_j - out_i), formed as exp(x_j + reverse_logcumsumexp(
    log|g_i| - out_i)) for g's positive and negative parts (PyTorch's formula)."""
    x, out = s["self"], s["result"]
    if x.ndim == 0 or x.numel() == 0:
        return g
    d = c["dim"] % x.ndim
    pos = A.log(A.clamp_min(g, 0.0))
    neg = A.log(A.clamp_min(A.neg(g), 0.0))
    up = A.exp(A.add(_reverse_lcse(A.sub(pos, out), d), x))
    down = A.exp(A.add(_reverse_lcse(A.sub(neg, out), d), x))
    return A.sub(up, down)


_cummax_cpu, _cummax_autograd = _extreme("cummax")
_cummin_cpu, _cummin_autograd = _extreme("cummin")

KERNELS = {
    "CPU": {"cummax": _cummax_cpu, "cummin": _cummin_cpu, "logcumsumexp": logcumsumexp},
    "Autograd": {"cummax": _cummax_autograd, "cummin": _cummin_autograd,
                 "logcumsumexp": AutogradKernel(Derivative(
                     "LogcumsumexpBackward", (Grad(_logcumsumexp_grad, ("self", "result")),), unbroadcast=False))},
}
