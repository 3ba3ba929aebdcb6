"""``scatter_reduce``: PyTorch's ``scatter_reduce.two`` op (``reduce`` one of "sum", "prod",
"mean", "amax", "amin"; ``include_self``), its own small family for the registration loop.

The CPU kernel is NumPy's unbuffered ``ufunc.at`` over the positions the index names (one pass
in C; repeated positions combine, NaN wins for amax/amin as PyTorch's).  ``include_self=False``
starts each scattered-to position from the reduction's identity, and a mean divides by how many
values reached each position (integers: floor division, as PyTorch).  Its derivative row is
PyTorch's: sum/mean pass the gradient (divided by the counts) to every contributor, amax/amin
split it evenly between the elements equal to the result, prod divides the product by each
factor (inputs with a zero: an error naming the limitation).
"""

from __future__ import annotations

import numpy as np

from dispatch_jit.autograd.kernel import AutogradKernel, Derivative, Grad
from dispatch_jit.errors import AutogradError, DTypeError, InvalidArgumentError
from dispatch_jit.ops import entries
from dispatch_jit.tensor import wrap

from .op import _as_1d, _check, _index_meta, _raise_bad

__all__ = ["SCHEMAS", "KERNELS", "METHODS"]

SCHEMAS = ["scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, "
           "bool include_self=True) -> Tensor"]
METHODS = ["scatter_reduce"]

A = entries("aten")
_REDUCES = ("sum", "prod", "mean", "amax", "amin")
_UFUNC = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.fmax, "amin": np.fmin}


def _identity(reduce: str, dtype: np.dtype):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype.kind == "f":
        return -np.inf if reduce == "amax" else np.inf
    if dtype.kind == "b":
        return reduce == "amin"
    info = np.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


def scatter_reduce(x, dim, index, src, reduce, include_self=True):
    if reduce not in _REDUCES:
        raise InvalidArgumentError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    axis = _check("scatter_reduce", x, dim, index, src)
    a = _as_1d(x._data)
    if a.dtype.kind == "c":
        raise DTypeError(f"scatter_reduce(): complex inputs are not supported (got {x.dtype.name})")
    i = _as_1d(index._data)
    bad = np.flatnonzero((i < 0) | (i >= a.shape[axis]))
    if bad.size:
        _raise_bad("scatter_reduce", index, int(bad[0]), a.shape[axis])
    coords = list(np.indices(i.shape))
    coords[axis] = i
    coords = tuple(coords)
    s = _as_1d(src._data)[tuple(slice(0, n) for n in i.shape)]
    out = np.array(a, order="C")
    if not include_self:
        out[coords] = _identity(reduce, a.dtype)
    if reduce in ("amax", "amin") and a.dtype.kind == "f":
        # fmax/fmin skip NaN; PyTorch's amax/amin propagate it: mark the NaNs after the reduction
        nan = np.zeros(out.shape, bool)
        np.logical_or.at(nan, coords, np.isnan(s))
        if include_self:
            nan |= np.isnan(a)
        (np.fmax if reduce == "amax" else np.fmin).at(out, coords, s)
        out[nan] = np.nan
    elif a.dtype.kind == "b" and reduce in ("sum", "mean"):
        np.logical_or.at(out, coords, s)
    else:
        _UFUNC[reduce].at(out, coords, s)
    if reduce == "mean":
        count = np.ones(out.shape, np.int64) if include_self else np.zeros(out.shape, np.int64)
        np.add.at(count, coords, 1)
        count[count == 0] = 1
        if a.dtype.kind in "iu":
            out = np.floor_divide(out, count).astype(a.dtype)
        elif a.dtype.kind == "f":
            out = (out / count).astype(a.dtype)
    return wrap(np.ascontiguousarray(out).reshape(x.shape))


def _zeros_like(t):
    from dispatch_jit.creation import zeros_like
    return zeros_like(t)


def _hits(s, c, like):
    """How many src values reach each position of the input (float, the input's shape)."""
    ones = A.add(A.mul(_zeros_like(s["index"]).to(like.dtype), 0), 1)
    return A.scatter_add(_zeros_like(like), c["dim"], s["index"], ones)


def _src_shaped(t, src_shape):
    """``t`` (the index's shape) padded with zeros to the src's shape."""
    from dispatch_jit.creation import zeros
    for d, (m, n) in enumerate(zip(t.shape, src_shape)):
        if m < n:
            shape = list(t.shape)
            shape[d] = n - m
            t = A.cat([t, zeros(tuple(shape), dtype=t.dtype, device=t.device)], d)
    return t


def _narrow_src(src, index):
    for d, m in enumerate(index.shape):
        if src.shape[d] != m:
            src = A.narrow(src, d, 0, m)
    return src


def _weights(g, s, c):
    """(gradient per input position, gradient per index position) before masking by include_self."""
    x, out, dim, reduce, incl = s["self"], s["result"], c["dim"], c["reduce"], c["include_self"]
    src = _narrow_src(s["src"], s["index"])
    hits = _hits(s, c, g)
    if reduce == "sum":
        return g, A.gather(g, dim, s["index"])
    if reduce == "mean":
        n = A.add(hits, 1) if incl else A.where(A.eq(hits, 0), 1, hits)
        gn = A.div(g, n)
        return gn, A.gather(gn, dim, s["index"])
    if reduce == "prod":
        if bool(A.any(A.eq(x, 0)).item()) or bool(A.any(A.eq(src, 0)).item()):
            raise AutogradError("scatter_reduce(reduce='prod'): the gradient with a zero among the inputs is not "
                                "implemented here; add a small offset or use reduce='sum' of logs")
        go = A.mul(g, out)
        return A.div(go, x), A.div(A.gather(go, dim, s["index"]), src)
    # amax / amin: split evenly between the elements equal to the result
    self_is = A.eq(x, out).to(g.dtype) if incl else _zeros_like(g)
    src_is = A.eq(src, A.gather(out, dim, s["index"])).to(g.dtype)
    ties = A.add(self_is, A.scatter_add(_zeros_like(g), dim, s["index"], src_is))
    gn = A.div(g, A.where(A.eq(ties, 0), 1, ties))
    return A.mul(gn, self_is), A.mul(A.gather(gn, dim, s["index"]), src_is)


def _self_grad(g, s, c):
    if not c["include_self"]:   # the input survives only where nothing was scattered
        return A.where(A.gt(_hits(s, c, g), 0), 0, g)
    return _weights(g, s, c)[0]


def _src_grad(g, s, c):
    return _src_shaped(_weights(g, s, c)[1], tuple(s["src"].shape))


_scatter_meta = _index_meta("scatter_reduce", lambda x, i: x)


def scatter_reduce_meta(x, dim, index, src, reduce, include_self=True):
    """What a trace learns without data (the Meta key): x's shape and dtype, after the checks that
    need no data; the bounds checks wait for the run.  Without it a trace ran the kernel on
    placeholders, whose index held whatever memory it was given, and broke at every call."""
    if reduce not in _REDUCES:
        raise InvalidArgumentError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if x.dtype.is_complex:
        raise DTypeError(f"scatter_reduce(): complex inputs are not supported (got {x.dtype.name})")
    return _scatter_meta(x, dim, index, src)


_SAVE = ("self", "index", "src", "result")
KERNELS = {
    "CPU": {"scatter_reduce.two": scatter_reduce},
    "Meta": {"scatter_reduce.two": scatter_reduce_meta},
    "Autograd": {"scatter_reduce.two": AutogradKernel(Derivative(
        "ScatterReduceBackward", (Grad(_self_grad, _SAVE), Grad(lambda g, s, c: None), Grad(_src_grad, _SAVE)),
        unbroadcast=False))},
}
