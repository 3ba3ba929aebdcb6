"""PyTorch's keyword arguments that select another computation: ``div(rounding_mode=)``,
``round(decimals=)``, ``nonzero(as_tuple=)``, ``scatter(reduce=)``, ``searchsorted(sorter=)``; and
``narrow``, whose ``start`` may be a 0-d integer tensor (read as an int, as ``torch.narrow``).

``dj.div``, ``dj.round``, ... (and their Tensor methods) are the Python functions here
(kernels/surface.py's ``PY_FUNCTIONS``): without the keyword they call the op itself, with it the
ops that compute what PyTorch computes (``floor_divide``; a scaled ``round``; ``where(cond)``'s
tuple; ``scatter_add``, or the op ``scatter.reduce`` defined here for ``reduce="multiply"``; a
``gather`` of the sequence by ``sorter``).  Operators (``x / y``) stay the op entries.
"""

from __future__ import annotations

import numpy as np

from dispatch_jit.dtypes import FLOAT, INT
from dispatch_jit.errors import DTypeError, InvalidArgumentError, SchemaError
from dispatch_jit.ops import entries
from dispatch_jit.registry import lookup
from dispatch_jit.tensor import Tensor, wrap

from .indexing.op import _as_1d, _check, _raise_bad

__all__ = ["SCHEMAS", "KERNELS", "PY_FUNCTIONS"]

SCHEMAS = ["scatter.reduce(Tensor self, int dim, Tensor index, Tensor src, *, str reduce) -> Tensor"]

A = entries("aten")
_MISSING = object()


def _entry(name: str):
    return lookup(f"aten::{name}").entry


def div(input, other, *, rounding_mode=None, out=None):  # noqa: A002  (PyTorch's argument name)
    """``input / other``: true division (``rounding_mode=None``), or rounded toward zero
    (``"trunc"``) or down (``"floor"``); the rounded forms keep integer dtypes, as ``torch.div``.

    >>> import dispatch_jit as dj
    >>> dj.div(dj.tensor([-7, 7]), dj.tensor([2, -2]), rounding_mode="trunc")
    tensor([-3, -3])
    >>> dj.tensor([-7.0, 7.0]).div(2, rounding_mode="floor")
    tensor([-4.,  3.])
    """
    if rounding_mode is None:
        return _entry("div.Tensor")(input, other) if out is None else _entry("div.Tensor")(input, other, out=out)
    if rounding_mode not in ("trunc", "floor"):
        raise InvalidArgumentError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                                   f"{rounding_mode!r}")
    if out is not None:
        raise SchemaError("div: out= with a rounding_mode is not supported here; assign the result instead")
    q = A.floor_divide(input, other)
    if rounding_mode == "floor":
        return q
    if q.dtype.category == FLOAT:
        return A.trunc(A.div(input, other))
    # integers: floor and trunc differ by one where the division is inexact and the signs differ
    r = A.remainder(input, other)
    neg = A.ne(A.lt(input, 0) if isinstance(input, Tensor) else input < 0,
               A.lt(other, 0) if isinstance(other, Tensor) else other < 0)
    return A.add(q, A.logical_and(A.ne(r, 0), neg).to(q.dtype))


def round(input, *, decimals=0, out=None):  # noqa: A001,A002  (PyTorch's names)
    """Round half to even; with ``decimals``, to that many decimal places (negative: to tens,
    hundreds, ...), computed as PyTorch's: ``round(x * 10**d) / 10**d`` (``d < 0``: ``round(x /
    10**-d) * 10**-d``).

    >>> import dispatch_jit as dj
    >>> dj.round(dj.tensor([1.2345, 2.5]), decimals=2)
    tensor([1.2300, 2.5000])
    >>> dj.tensor([1234.5, -1250.0]).round(decimals=-2)
    tensor([ 1200., -1200.])
    """
    rnd = _entry("round")
    if decimals == 0:
        return rnd(input) if out is None else rnd(input, out=out)
    if out is not None:
        raise SchemaError("round: out= with decimals is not supported here; assign the result instead")
    if input.dtype.category != FLOAT:
        raise DTypeError(f"\"round_cpu\" not implemented for '{input.dtype.name}' with decimals={decimals} (as "
                         f"PyTorch); convert first: x.to(dj.float64)")
    scale = float(10 ** abs(decimals))
    if decimals > 0:
        return A.div(rnd(A.mul(input, scale)), scale)
    return A.mul(rnd(A.div(input, scale)), scale)


def nonzero(input, *, out=None, as_tuple=False):  # noqa: A002
    """The indices of the nonzero elements: one row per element (``as_tuple=False``), or one 1-D
    tensor per dimension (``as_tuple=True``: what ``x[dj.nonzero(x, as_tuple=True)]`` indexes with).

    >>> import dispatch_jit as dj
    >>> dj.nonzero(dj.tensor([[0, 1], [1, 0]]), as_tuple=True)
    (tensor([0, 1]), tensor([1, 0]))
    """
    idx = _entry("nonzero")(input) if out is None else _entry("nonzero")(input, out=out)
    if not as_tuple:
        return idx
    if out is not None:
        raise SchemaError("nonzero: out= with as_tuple=True is not supported (as PyTorch)")
    if input.ndim == 0:          # PyTorch: one index tensor, [0] or empty
        return (_scalar_nonzero(input),)
    return tuple(A.reshape(A.narrow(idx, 1, d, 1), (-1,)) for d in range(input.ndim))


def _scalar_nonzero(x):
    from dispatch_jit.creation import tensor
    from dispatch_jit.dtypes import int64
    return tensor([0] if bool(x.item()) else [], dtype=int64, device=x.device)


def scatter(input, dim, index, src=_MISSING, *, value=_MISSING, reduce=None):  # noqa: A002
    """``input`` with ``src`` (a tensor, or a number: ``value``) written at ``index`` along ``dim``;
    with ``reduce="add"`` or ``"multiply"`` combined with what is there instead, as ``torch.scatter``.

    >>> import dispatch_jit as dj
    >>> i = dj.tensor([[0, 0], [2, 1]])
    >>> dj.ones(2, 3).scatter(1, i, 3.0, reduce="multiply")
    tensor([[9., 1., 1.],
            [1., 3., 3.]])
    """
    if src is _MISSING:
        if value is _MISSING:
            raise SchemaError("scatter() missing required argument 'src' (or 'value')")
        src = value
    if reduce is None:
        return _entry("scatter")(input, dim, index, src)
    if reduce not in ("add", "multiply"):
        raise InvalidArgumentError("reduce argument must be either add or multiply.")
    if not isinstance(src, Tensor):
        from dispatch_jit.creation import full
        src = full(tuple(index.shape), src, dtype=input.dtype, device=input.device)
    if reduce == "add":
        return _entry("scatter_add")(input, dim, index, src)
    return lookup("aten::scatter.reduce").entry(input, dim, index, src, reduce=reduce)


def scatter_reduce_kernel(x, dim, index, src, reduce):
    """CPU kernel of ``scatter.reduce``: NumPy's unbuffered ``ufunc.at`` over the flat positions."""
    axis = _check("scatter", x, dim, index, src)
    a = _as_1d(x._data)
    if a.dtype == np.bool_ or a.dtype in (np.uint16, np.uint32, np.uint64):
        raise DTypeError(f"scatter(reduce={reduce!r}): not implemented for '{x.dtype.name}' (as PyTorch); convert "
                         f"first: x.to(dj.int64)")
    i = _as_1d(index._data)
    bad = np.flatnonzero((i < 0) | (i >= a.shape[axis]))
    if bad.size:
        _raise_bad("scatter", index, int(bad[0]), a.shape[axis])
    coords = list(np.indices(i.shape))
    coords[axis] = i
    s = _as_1d(src._data)[tuple(slice(0, n) for n in i.shape)]
    out = np.array(a, order="C")
    (np.multiply if reduce == "multiply" else np.add).at(out, tuple(coords), s)
    return wrap(out.reshape(x.shape))


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, out=None,  # noqa: A002
                 sorter=None):
    """Where each element of ``input`` would go in ``sorted_sequence`` to keep it sorted; with
    ``sorter``, the sequence is ``sorted_sequence[sorter]`` (the indices that sort it), as PyTorch.

    >>> import dispatch_jit as dj
    >>> dj.searchsorted(dj.tensor([3, 1, 2]), dj.tensor([2, 5]), sorter=dj.tensor([1, 2, 0]))
    tensor([1, 3])
    """
    if sorter is not None:
        if not isinstance(sorter, Tensor) or sorter.dtype.category != INT or \
                tuple(sorter.shape) != tuple(sorted_sequence.shape):
            raise SchemaError(f"searchsorted: sorter must be an integer tensor of the sorted sequence's shape "
                              f"{tuple(sorted_sequence.shape)}, got "
                              f"{tuple(sorter.shape) if isinstance(sorter, Tensor) else type(sorter).__name__}")
        sorted_sequence = A.gather(sorted_sequence, -1, sorter.to(_int64()))
    kw = {"out_int32": out_int32, "right": right, "side": side}
    if out is not None:
        kw["out"] = out
    return _entry("searchsorted.Tensor")(sorted_sequence, input, **kw)


def narrow(input, dim, start, length):  # noqa: A002
    """The view of ``input`` from ``start`` for ``length`` elements along ``dim``; ``start`` is an int or,
    as in ``torch.narrow``, a 0-d integer tensor (its value is read).

    >>> import dispatch_jit as dj
    >>> dj.narrow(dj.arange(5), 0, dj.tensor(1), 3)
    tensor([1, 2, 3])
    """
    if isinstance(start, Tensor):
        if start.ndim != 0 or start.dtype.category != INT:
            raise InvalidArgumentError(f"narrow: start must be an 0-dim integral Tensor (got a {start.ndim}-d "
                                       f"{start.dtype.name} tensor); pass an int or a 0-d integer tensor")
        start = int(start.item())
    return _entry("narrow")(input, dim, start, length)


def _int64():
    from dispatch_jit.dtypes import int64
    return int64


def divide(input, other, *, rounding_mode=None, out=None):  # noqa: A002
    return div(input, other, rounding_mode=rounding_mode, out=out)


divide.__doc__ = div.__doc__.replace("dj.div(", "dj.divide(").replace(".div(", ".divide(")

KERNELS = {"CPU": {"scatter.reduce": scatter_reduce_kernel}}
PY_FUNCTIONS = {"div": (div, True), "divide": (divide, True), "round": (round, True), "nonzero": (nonzero, True),
                "scatter": (scatter, True), "searchsorted": (searchsorted, False), "narrow": (narrow, True)}
# each function's op without the keyword: what introspection (dj.dump_table(dj.div)) and the
# docstring's first line (its schema, as every op function's) name
_OPS = {"div": "div.Tensor", "divide": "div.Tensor", "round": "round", "nonzero": "nonzero", "scatter": "scatter",
        "searchsorted": "searchsorted.Tensor", "narrow": "narrow"}


def attach_ops() -> None:
    """Give each function its op (``_op``) and put the op's schema first in its docstring; called by
    surface.py once the ops are defined."""
    for name, opname in _OPS.items():
        fn, op = PY_FUNCTIONS[name][0], lookup(f"aten::{opname}")
        if getattr(fn, "_op", None) is None:
            fn._op = op
            fn.__doc__ = f"{op.schema}\n\n{fn.__doc__}"
