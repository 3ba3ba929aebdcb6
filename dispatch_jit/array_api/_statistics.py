"""The standard's statistical and utility functions over the dispatcher's reductions.

Where the standard and PyTorch differ, the standard's rule is applied here: sums and products
of small integers accumulate in the default integer of their signedness (uint8 -> uint64, where
PyTorch gives int64), ``var``/``std`` take ``correction`` (default 0, PyTorch's default is 1),
``max``/``min`` are PyTorch's ``amax``/``amin``, and the cumulative functions take
``include_initial``.
"""

from __future__ import annotations

from dispatch_jit.dtypes import BOOL, INT, as_dtype, bool_, int64, uint64
from dispatch_jit.errors import AxisError, InvalidArgumentError
from dispatch_jit.ops import entries

from ._manipulation import concat, normalize

__all__ = ["sum", "prod", "mean", "var", "std", "max", "min", "all", "any", "cumulative_sum", "cumulative_prod",
           "diff", "count_nonzero"]

A = entries("aten")


def _axes(axis, ndim: int):
    if axis is None:
        return None
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(normalize(a, ndim, "axis") for a in axes)


def _none(axis) -> bool:
    """``axis=()``: the standard reduces over no axis (each element alone), where PyTorch's dim=()
    means every axis; the functions below answer it without a reduction."""
    return axis is not None and not isinstance(axis, int) and len(tuple(axis)) == 0


def accumulation_dtype(x, dtype):
    """The standard's dtype for sum, prod and the cumulative functions: given, else the default
    integer of the input's signedness for integers and bool, else the input's."""
    if dtype is not None:
        return as_dtype(dtype)
    d = x.dtype
    if d.category == BOOL or (d.category == INT and d.is_signed):
        return int64
    if d.category == INT:
        return uint64
    return d


def sum(x, /, *, axis=None, dtype=None, keepdims=False):  # noqa: A001
    """The sum over ``axis`` (all by default); uint8 sums are uint64, as the standard says.

    >>> from dispatch_jit import array_api as xp
    >>> xp.sum(xp.asarray([200, 100], dtype=xp.uint8))
    tensor(300, dtype=dj.uint64)
    """
    if _none(axis):
        return A.to(x, accumulation_dtype(x, dtype), True)
    return A.sum(x, _axes(axis, x.ndim), keepdims, dtype=accumulation_dtype(x, dtype))


def prod(x, /, *, axis=None, dtype=None, keepdims=False):
    if _none(axis):
        return A.to(x, accumulation_dtype(x, dtype), True)
    return A.prod(x, _axes(axis, x.ndim), keepdims, dtype=accumulation_dtype(x, dtype))


def mean(x, /, *, axis=None, keepdims=False):
    if _none(axis):
        return A.mul(x, 1.0)                        # a new array of mean's dtype (floating inputs only)
    return A.mean(x, _axes(axis, x.ndim), keepdims)


def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    """The variance with ``correction`` degrees of freedom removed (0 by default: the standard's,
    where PyTorch's default is 1)."""
    if _none(axis):
        # one element's deviation is 0; over n - correction = 1 - correction degrees of freedom
        return A.div(A.sub(x, x), 1.0 - float(correction))
    return A.var(x, _axes(axis, x.ndim), None, keepdims, correction=float(correction))


def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    if _none(axis):
        return A.sqrt(var(x, axis=(), correction=correction))
    return A.std(x, _axes(axis, x.ndim), None, keepdims, correction=float(correction))


def max(x, /, *, axis=None, keepdims=False):  # noqa: A001
    if _none(axis):
        return A.clone(x)
    axes = _axes(axis, x.ndim)
    return A.max(x, list(range(x.ndim)) if axes is None else axes, keepdims)


def min(x, /, *, axis=None, keepdims=False):  # noqa: A001
    if _none(axis):
        return A.clone(x)
    axes = _axes(axis, x.ndim)
    return A.min(x, list(range(x.ndim)) if axes is None else axes, keepdims)


def _truth(op, x, axis, keepdims):
    """all/any as the standard's: bool results (PyTorch's keep uint8 for uint8 inputs), axis=()
    each element's truth."""
    r = A.ne(x, 0) if _none(axis) else op(x, _axes(axis, x.ndim), keepdims)
    return r if r.dtype is bool_ else A.to(r, bool_, False)


def all(x, /, *, axis=None, keepdims=False):  # noqa: A001
    return _truth(A.all, x, axis, keepdims)


def any(x, /, *, axis=None, keepdims=False):  # noqa: A001
    return _truth(A.any, x, axis, keepdims)


def count_nonzero(x, /, *, axis=None, keepdims=False):
    if _none(axis):
        return A.to(A.ne(x, 0), int64, False)
    return A.sum(A.ne(x, 0), _axes(axis, x.ndim), keepdims, dtype=int64)


def _cumulative(opname: str, initial: int):
    op = getattr(A, opname)

    def fn(x, /, *, axis=None, dtype=None, include_initial=False):
        if axis is None:
            if x.ndim > 1:
                raise AxisError(f"{fn.__name__}: axis is required for a {x.ndim}-dimensional array")
            axis = 0
        if x.ndim == 0:
            raise AxisError(f"{fn.__name__}: a zero-dimensional array has no axis to accumulate along")
        ax = normalize(axis, x.ndim, "axis")
        dt = accumulation_dtype(x, dtype)
        src = x if x.dtype is dt or x.dtype.category != BOOL else A.to(x, dt, False)
        out = op(src, ax, dtype=dt)
        if include_initial:
            shape = list(x.shape)
            shape[ax] = 1
            from dispatch_jit.creation import full
            out = A.cat([full(tuple(shape), initial, dtype=dt, device=x.device), out], ax)
        return out
    fn.__name__ = fn.__qualname__ = {"cumsum": "cumulative_sum", "cumprod": "cumulative_prod"}[opname]
    return fn


cumulative_sum = _cumulative("cumsum", 0)
cumulative_prod = _cumulative("cumprod", 1)


def diff(x, /, *, axis=-1, n=1, prepend=None, append=None):
    if x.ndim == 0:
        raise AxisError("diff: a zero-dimensional array has no axis")
    if n < 0:
        raise InvalidArgumentError(f"diff: n must be non-negative, got {n}")
    ax = normalize(axis, x.ndim, "axis")
    if prepend is not None or append is not None:
        x = concat([a for a in (prepend, x, append) if a is not None], axis=ax)
    for _ in range(n):
        m = x.shape[ax]
        if m == 0:
            break
        hi, lo = A.narrow(x, ax, 1, m - 1), A.narrow(x, ax, 0, m - 1)
        x = A.ne(hi, lo) if x.dtype is bool_ else A.sub(hi, lo)
    return x


