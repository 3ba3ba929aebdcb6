"""PyTorch's reductions that are compositions of other ops: nansum, nanmean, count_nonzero,
aminmax, var_mean, std_mean, kthvalue, nanmedian, quantile and nanquantile (``PY_FUNCTIONS``:
``dj.X`` and ``Tensor.X``), with PyTorch's signatures, result types and checks.

Each calls the reduction, sort and gather ops, so autograd differentiates through them (an order
statistic's value is the input gathered at its index: the gradient goes to that element) and a
trace records ordinary op calls.  NaNs sort last (the sort op's order), which is what the nan-
variants' counting of the non-NaN prefix of a sorted row relies on.
"""

from __future__ import annotations

import math

from dispatch_jit.dtypes import BOOL, COMPLEX, FLOAT, float32, float64, int64
from dispatch_jit.errors import DTypeError, InvalidArgumentError, SchemaError, ShapeError
from dispatch_jit.ops import entries
from dispatch_jit.return_types import named

from ..shape.op import normalize_axis

__all__ = ["PY_FUNCTIONS"]

A = entries("aten")
AminmaxResult = named("aminmax", ("min", "max"))
KthvalueResult = named("kthvalue", ("values", "indices"))
NanmedianResult = named("nanmedian", ("values", "indices"))


def _dims(dim):
    return None if dim is None else ([dim] if isinstance(dim, int) else list(dim))


def nansum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002  (PyTorch's argument names)
    """The sum with NaNs counted as zero, as ``torch.nansum``.

    >>> import dispatch_jit as dj
    >>> dj.nansum(dj.tensor([1.0, float("nan"), 2.0]))
    tensor(3.)
    """
    if input.dtype.category == COMPLEX:
        raise DTypeError("nansum does not support complex inputs")
    x = A.where(A.isnan(input), 0, input) if input.dtype.category == FLOAT else input
    return A.sum(x, _dims(dim), keepdim, dtype=dtype)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """The mean of the non-NaN elements (NaN where there are none), as ``torch.nanmean``.

    >>> import dispatch_jit as dj
    >>> dj.tensor([[1.0, float("nan")], [2.0, 4.0]]).nanmean(1)
    tensor([1., 3.])
    """
    if input.dtype.category != FLOAT and dtype is None:
        raise DTypeError(f"nanmean(): expected input to have floating point or complex dtype but got "
                         f"{_torch_name(input.dtype)}")
    count = A.sum(A.logical_not(A.isnan(input)), _dims(dim), keepdim)
    return A.div(nansum(input, dim, keepdim, dtype=dtype), count)


def _torch_name(dt) -> str:
    return {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool",
            "float32": "Float", "float64": "Double", "float16": "Half"}.get(dt.name, dt.name)


def count_nonzero(input, dim=None):  # noqa: A002
    """How many elements are not zero (over ``dim``, an int or a tuple of ints), as int64.

    >>> import dispatch_jit as dj
    >>> dj.count_nonzero(dj.tensor([[0, 1], [2, 3]]), 0)
    tensor([1, 2])
    """
    return A.sum(A.ne(input, 0), _dims(dim), False, dtype=int64)


def aminmax(input, *, dim=None, keepdim=False):  # noqa: A002
    """The minimum and the maximum (``min``, ``max``) over all elements or along ``dim``.

    >>> import dispatch_jit as dj
    >>> dj.aminmax(dj.tensor([[3, 1], [2, 5]]), dim=1)
    aminmax(min=tensor([1, 2]), max=tensor([3, 5]))
    """
    if input.numel() == 0:
        raise ShapeError("aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
                         "identity.")
    if dim is None:
        if keepdim:
            dims = list(range(input.ndim))
            return AminmaxResult(A.min(input, dims, True), A.max(input, dims, True))
        return AminmaxResult(A.min(input, None), A.max(input, None))
    if input.ndim == 0:
        normalize_axis(dim, 1, "aminmax")
        return AminmaxResult(A.clone(input), A.clone(input))
    return AminmaxResult(A.min(input, [dim], keepdim), A.max(input, [dim], keepdim))


def _stat_mean(name: str):
    def fn(input, dim=None, unbiased=None, keepdim=False, *, correction=None):  # noqa: A002
        if dim.__class__ is bool:          # the overload (input, unbiased)
            if unbiased is not None or keepdim:
                raise SchemaError(f"{name}(input, unbiased) takes nothing more; for dims pass "
                                  f"{name}(input, dim, unbiased, keepdim)")
            dim, unbiased = None, dim
        stat = getattr(A, name.split("_")[0])(input, _dims(dim), unbiased, keepdim, correction=correction)
        return stat, A.mean(input, _dims(dim), keepdim)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"``({name.split('_')[0]}, mean)`` over the same dims, as ``torch.{name}``: "
                  f"``{name}(x, dim=None, unbiased=None, keepdim=False, *, correction=None)`` or "
                  f"``{name}(x, unbiased)``.\n\n"
                  f">>> import dispatch_jit as dj\n"
                  f">>> dj.{name}(dj.tensor([1.0, 3.0]), correction=0)\n"
                  f"(tensor({'1.' if name == 'var_mean' else '1.'}), tensor(2.))\n")
    return fn


def _check_sortable(name: str, x):
    if x.dtype.category == COMPLEX:
        raise DTypeError(f"{name}(): complex values are not ordered")


def kthvalue(input, k, dim=-1, keepdim=False):  # noqa: A002
    """The ``k``-th smallest element along ``dim`` and its index (NaN counts as the largest), as
    ``torch.kthvalue``.

    >>> import dispatch_jit as dj
    >>> dj.kthvalue(dj.tensor([3.0, 1.0, 2.0]), 2)
    kthvalue(values=tensor(2.), indices=tensor(2))
    """
    _check_sortable("kthvalue", input)
    axis = normalize_axis(dim, max(input.ndim, 1), "kthvalue")
    n = input.shape[axis] if input.ndim else 1
    if not 1 <= k <= n:
        raise OutOfRange(f"kthvalue(): selected number k out of range for dimension {dim}")
    if input.ndim == 0:
        from dispatch_jit.creation import zeros
        return KthvalueResult(A.clone(input), zeros((), dtype=int64, device=input.device))
    order = A.argsort(input, axis, False, stable=True)
    idx = A.narrow(order, axis, k - 1, 1)
    return _picked(KthvalueResult, input, idx, axis, keepdim)


class OutOfRange(InvalidArgumentError, IndexError):
    """k beyond the dimension (PyTorch raises an IndexError-like RuntimeError)."""


def _picked(result, x, idx, axis, keepdim):
    values = A.gather(x, axis, idx)
    if not keepdim:
        values, idx = A.squeeze(values, axis), A.squeeze(idx, axis)
    return result(values, idx)


def _nan_counts(x, axis):
    """Non-NaN elements per row along ``axis`` (kept as a size-1 dim)."""
    if x.dtype.category != FLOAT:
        from dispatch_jit.creation import full
        shape = list(x.shape)
        shape[axis] = 1
        return full(tuple(shape), x.shape[axis], dtype=int64, device=x.device)
    return A.sum(A.logical_not(A.isnan(x)), [axis], True, dtype=int64)


def _nanmedian_along(x, axis, keepdim):
    if x.dtype.category in (COMPLEX, BOOL):
        raise DTypeError(f"\"nanmedian_out\" not implemented for '{_torch_name(x.dtype)}'")
    if x.shape[axis] == 0:
        raise ShapeError(f"nanmedian(): Expected reduction dim {axis} to have non-zero size.")
    order = A.argsort(x, axis, False, stable=True)
    c = _nan_counts(x, axis)
    # the lower middle of the non-NaN prefix; a row of NaNs only takes its first (C's (0 - 1) / 2 == 0)
    pos = A.floor_divide(A.clamp_min(A.sub(c, 1), 0), 2)
    return _picked(NanmedianResult, x, A.gather(order, axis, pos), axis, keepdim)


def nanmedian(input, dim=None, keepdim=False):  # noqa: A002
    """The lower median of the non-NaN elements (NaN where all are NaN); with ``dim`` also its index,
    as ``torch.nanmedian``.

    >>> import dispatch_jit as dj
    >>> dj.nanmedian(dj.tensor([1.0, float("nan"), 3.0, 2.0]))
    tensor(2.)
    """
    if dim is None:
        if input.numel() == 0:
            from dispatch_jit.creation import full
            return full((), math.nan, dtype=input.dtype, device=input.device)
        return _nanmedian_along(A.reshape(input, (-1,)), 0, False).values
    axis = normalize_axis(dim, max(input.ndim, 1), "nanmedian")
    if input.ndim == 0:
        from dispatch_jit.creation import zeros
        return NanmedianResult(A.clone(input), zeros((), dtype=int64, device=input.device))
    return _nanmedian_along(input, axis, keepdim)


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(name: str, ignore_nan: bool):
    def fn(input, q, dim=None, keepdim=False, *, interpolation="linear"):  # noqa: A002
        if input.numel() == 0:
            raise ShapeError(f"{name}() input tensor must be non-empty")
        if input.dtype not in (float32, float64):
            raise DTypeError(f"{name}() input tensor must be either float or double dtype")
        if interpolation not in _INTERPOLATIONS:
            raise InvalidArgumentError(f"{name}() interpolation must be one of linear, lower, higher, midpoint or "
                                       f"nearest. Got {interpolation}")
        if hasattr(q, "_sig"):
            if q.ndim > 1:
                raise ShapeError(f"{name}() q must be a scalar or 1D tensor")
            if q.dtype is not input.dtype:
                raise DTypeError(f"{name}() q tensor must be same dtype as the input tensor")
            qs, scalar = q, q.ndim == 0
            qv = q.detach()
            if q.numel() and not bool(A.all(A.logical_and(A.ge(qv, 0), A.le(qv, 1))).item()):
                raise InvalidArgumentError(f"{name}() q values must be in the range [0, 1]")
        else:
            if not 0 <= q <= 1:
                raise InvalidArgumentError(f"{name}() q must be in the range [0, 1] but got {q}")
            from dispatch_jit.creation import tensor
            qs, scalar = tensor(float(q), dtype=input.dtype, device=input.device), True
        qs = A.reshape(qs, (-1,))
        if dim is None:
            x, axis = A.reshape(input, (-1,)), 0
        else:
            axis = normalize_axis(dim, max(input.ndim, 1), name)
            x = input if input.ndim else A.reshape(input, (1,))
        out = _quantile_rows(x, qs, axis, interpolation, ignore_nan)    # (Q, ...rest) with axis removed
        if keepdim:
            if dim is None:
                out = A.reshape(out, (out.shape[0],) + (1,) * input.ndim)
            elif input.ndim:
                out = A.unsqueeze(out, axis + 1)
        if scalar:
            out = A.squeeze(out, 0)
        return out

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"The ``q``-th quantiles (a float, or a 0-d or 1-d tensor: its values lead the result's "
                  f"dims) of all elements or along ``dim``, interpolated between the two nearest ranks as "
                  f"``interpolation`` says, as ``torch.{name}``"
                  + ("; NaNs are ignored (all NaN: NaN)" if ignore_nan else "; a NaN in a row makes it NaN")
                  + f".\n\n>>> import dispatch_jit as dj\n"
                  f">>> dj.{name}(dj.tensor([1.0, 2.0, 3.0, 4.0]), 0.5)\ntensor(2.5000)\n")
    return fn


def _quantile_rows(x, qs, axis, interpolation, ignore_nan):
    from dispatch_jit.creation import full
    xs = A.sort(_last(x, axis), -1, False, stable=True).values
    n = xs.shape[-1]
    lead = tuple(xs.shape[:-1])
    nq = qs.shape[0]
    if ignore_nan:
        c = A.sum(A.logical_not(A.isnan(xs)), [-1], True, dtype=int64)
    else:
        c = full(lead + (1,), n, dtype=int64, device=x.device)
    last = A.clamp_min(A.sub(c, 1), 0).to(xs.dtype)                          # (..., 1)
    ranks = A.mul(A.reshape(qs, (1,) * len(lead) + (nq,)), last)             # (..., Q)
    lo = A.floor(ranks)
    hi = A.ceil(ranks)
    if interpolation == "lower":
        ranks = lo
    elif interpolation == "higher":
        ranks = hi
    elif interpolation == "nearest":
        ranks = A.round(ranks)
    lo_i = A.floor(ranks).to(int64)
    hi_i = A.ceil(ranks).to(int64)
    below = A.gather(xs, -1, lo_i)
    above = A.gather(xs, -1, hi_i)
    if interpolation in ("linear", "midpoint"):
        w = A.sub(ranks, lo) if interpolation == "linear" else A.add(A.mul(ranks, 0), 0.5)
        # PyTorch's lerp: from the nearer end, so a weight of 1 gives the upper value exactly
        out = A.where(A.lt(w, 0.5), A.add(below, A.mul(A.sub(above, below), w)),
                      A.sub(above, A.mul(A.sub(above, below), A.sub(1, w))))
    else:
        out = below
    if ignore_nan:
        out = A.where(A.eq(c, 0), math.nan, out)
    else:
        out = A.where(A.any(A.isnan(xs), [-1], True), math.nan, out)
    nd = out.ndim
    return A.permute(out, [nd - 1] + list(range(nd - 1)))


def _last(x, axis):
    nd = x.ndim
    return x if axis == nd - 1 else A.permute(x, [d for d in range(nd) if d != axis] + [axis])


PY_FUNCTIONS = {
    "nansum": (nansum, True), "nanmean": (nanmean, True), "count_nonzero": (count_nonzero, True),
    "aminmax": (aminmax, True), "var_mean": (_stat_mean("var_mean"), False), "std_mean": (_stat_mean("std_mean"), False),
    "kthvalue": (kthvalue, True), "nanmedian": (nanmedian, True), "quantile": (_quantile("quantile", False), True),
    "nanquantile": (_quantile("nanquantile", True), True),
}
