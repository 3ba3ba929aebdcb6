"""gather, scatter and scatter_add as dispatcher ops: PyTorch's schemas and semantics, and the
CPU kernels over cpu.py's Numba loops.

PyTorch's rules, checked here with errors that name the op and the shapes: the index is an
integer tensor with as many dimensions as the input (a 0-d input takes a 0-d or 1-d index), no
larger than the input outside ``dim`` (and, for scatter, no larger than ``src`` anywhere);
scatter's ``src`` has the input's dtype, or is a Python number (``scatter(x, 0, i, 1.5)``,
PyTorch's ``scatter.value``).  The result has the input's dtype; scatter returns a new tensor
(the in-place ``scatter_`` writes it back, dispatch_jit/surface_methods.py).  No CUDA kernels
yet: on a CUDA tensor the dispatcher raises NoKernelError (README).
"""

from __future__ import annotations


import numpy as np

from dispatch_jit import return_types
from dispatch_jit.dtypes import COMPLEX, INT, int64
from dispatch_jit.errors import DTypeError, OutOfBoundsError, ShapeError
from dispatch_jit.tensor import Tensor, wrap

from ..arrayops.op import _order, _rows, _unrows
from ..shape.op import normalize_axis
from . import cpu, select

__all__ = ["SCHEMAS", "CPU_KERNELS", "META_KERNELS", "METHODS", "TopkResult"]

SCHEMAS = [
    "gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor",
    "scatter(Tensor self, int dim, Tensor index, Tensor src) -> Tensor",
    "scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor",
    "topk(Tensor self, int k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)",
]
METHODS = ["gather", "scatter", "scatter_add", "topk"]

# what topk returns, as torch.return_types.topk
TopkResult = return_types.named("topk", ("values", "indices"))

# above this k the one-pass selection (select.py) costs more than a stable sort of the row
_SELECT_MAX_K = 64

# Numba has no float16 arithmetic and no bool addition: scatter_add accumulates those in the
# type that holds them exactly (bool as uint8, then != 0: PyTorch's bool scatter_add is an or)
_ADD_AS = {np.dtype(np.float16): np.float32, np.dtype(np.bool_): np.uint8}


def _check(op: str, x, dim: int, index, src=None) -> int:
    if not isinstance(index, Tensor) or index.dtype.category != INT:
        got = index.dtype.name if isinstance(index, Tensor) else type(index).__name__
        raise DTypeError(f"{op}: index must be an integer tensor (int64, as PyTorch's), got {got}")
    axis = normalize_axis(dim, x.ndim, op)
    if index.ndim != max(x.ndim, 1) and not (x.ndim == 0 and index.ndim == 0):
        raise ShapeError(f"{op}: index must have as many dimensions as the input ({x.ndim}), got index of "
                         f"shape {tuple(index.shape)}")
    xs, is_ = (tuple(x.shape) or (1,)), (tuple(index.shape) or (1,))
    for d, (n, m) in enumerate(zip(xs, is_)):
        if d != axis and m > n:
            raise ShapeError(f"{op}: index {tuple(index.shape)} is larger than the input {tuple(x.shape)} in "
                             f"dimension {d} (only dimension {axis}, dim, may be larger)")
    if isinstance(src, Tensor):
        if src.dtype is not x.dtype:
            raise DTypeError(f"{op}: expected src to have the input's dtype {x.dtype.name}, got "
                             f"{src.dtype.name}; convert it: src.to(x.dtype)")
        ss = tuple(src.shape) or (1,)
        if len(ss) != len(is_) or any(m > n for m, n in zip(is_, ss)):
            raise ShapeError(f"{op}: index {tuple(index.shape)} must be no larger than src "
                             f"{tuple(src.shape)} in every dimension")
    return axis


def _raise_bad(op: str, index, pos: int, size: int):
    bad = int(index._data.reshape(-1)[pos])
    hint = " (negative indices are refused, as PyTorch's; add the size to count from the end)" if bad < 0 else ""
    raise OutOfBoundsError(f"{op}: index {bad} is out of bounds for dimension of size {size}{hint}")


def _as_1d(a: np.ndarray) -> np.ndarray:
    return a.reshape(1) if a.ndim == 0 else a


def gather(x, dim, index, sparse_grad=False):
    axis = _check("gather", x, dim, index)
    a = _as_1d(x._data)
    out, bad = cpu.gather(a, _as_1d(index._data), axis)
    if bad >= 0:
        _raise_bad("gather", index, bad, a.shape[axis])
    return wrap(out.reshape(index.shape))


def _scatter(op: str, accumulate: bool):
    def scatter(x, dim, index, src):
        axis = _check(op, x, dim, index, src)
        a = _as_1d(x._data)
        compute = _ADD_AS.get(a.dtype) if accumulate else None
        out = np.array(a, dtype=compute or a.dtype, order="C")
        if isinstance(src, Tensor):
            s = _as_1d(src._data)
            s = s.astype(compute) if compute else s
        else:   # a Python number: PyTorch's scatter.value, the number cast to the input's dtype
            s = np.broadcast_to(np.asarray(src).astype(a.dtype).astype(out.dtype), _as_1d(index._data).shape)
        bad = cpu.scatter(out, _as_1d(index._data), s, axis, accumulate)
        if bad >= 0:
            _raise_bad(op, index, bad, a.shape[axis])
        if compute:
            out = (out != 0) if a.dtype == np.bool_ else out.astype(a.dtype)
        return wrap(out.reshape(x.shape))
    scatter.__name__ = op
    return scatter


# Numba has no float16 and orders no bools: those rows are ranked as the type holding them exactly
_RANK_AS = {np.dtype(np.float16): np.float32, np.dtype(np.bool_): np.uint8}


def topk(x, k, dim=-1, largest=True, sorted=True):  # noqa: A002  (PyTorch's argument name)
    """The k largest (or smallest) along ``dim``, best first (``sorted=False`` sorts too, as
    PyTorch allows); NaN counts as the largest value and equal elements keep their index order."""
    if x.dtype.category == COMPLEX:
        raise DTypeError(f"topk: complex tensors are not ordered (got {x.dtype.name}); rank x.abs()")
    a = x._data
    axis = normalize_axis(dim, a.ndim, "topk")
    n = a.shape[axis] if a.ndim else 1
    if not 0 <= k <= n:
        raise ShapeError(f"topk: k ({k}) is out of range for dimension {axis} of size {n}")
    if k > _SELECT_MAX_K:
        order, _ = _order(x, dim, largest, "topk")
        idx = np.take(order, np.arange(k), axis) if a.ndim else order
        vals = np.take_along_axis(a, idx, axis) if a.ndim else a.copy()
    else:
        rows, moved = _rows(a, axis)
        ranked = rows.astype(_RANK_AS[rows.dtype]) if rows.dtype in _RANK_AS else rows
        v, i = select.topk_rows(ranked, k, largest)
        kept = moved[:-1] + (k,)
        vals = _unrows(v.astype(a.dtype, copy=False), kept, axis, a.ndim)
        idx = _unrows(i, kept, axis, a.ndim)
    # np.asarray, not ascontiguousarray: that makes a 0-d result 1-d
    return TopkResult(wrap(np.asarray(vals, order="C")), wrap(np.asarray(idx, order="C")))


def topk_meta(x, k, dim=-1, largest=True, sorted=True):  # noqa: A002
    """What a trace learns about topk without data (compiler/trace/symbolic.py asks the Meta key): x's
    shape with ``dim`` of size k.  The size check waits for the run (a trace holds no sizes)."""
    from dispatch_jit.creation import empty
    shape = list(x.shape)
    if x.ndim:
        shape[normalize_axis(dim, x.ndim, "topk")] = k
    return TopkResult(empty(*shape, dtype=x.dtype, device=x.device), empty(*shape, dtype=int64, device=x.device))


def _index_meta(op: str, out_of):
    """gather's, scatter's and scatter_add's types without data (their kernels read the indices to
    check them): ``out_of(x, index)``'s shape, x's dtype.  The dtype checks are made here; the size
    and bounds checks wait for the run (a trace holds no sizes)."""
    def meta(x, dim, index, src=None, **_):
        from dispatch_jit.creation import empty
        if index.dtype.category != INT:
            raise DTypeError(f"{op}: expected an integer (int64) index, got {index.dtype.name}")
        if isinstance(src, Tensor) and src.dtype is not x.dtype:
            raise DTypeError(f"{op}: expected src to have the input's dtype {x.dtype.name}, got "
                             f"{src.dtype.name}; convert it: src.to(x.dtype)")
        return empty(*out_of(x, index).shape, dtype=x.dtype, device=x.device)
    meta.__name__ = f"{op}_meta"
    return meta


META_KERNELS = {"topk": topk_meta, "gather": _index_meta("gather", lambda x, i: i),
                "scatter": _index_meta("scatter", lambda x, i: x),
                "scatter_add": _index_meta("scatter_add", lambda x, i: x)}

CPU_KERNELS = {"topk": topk, "gather": gather, "scatter": _scatter("scatter", False), "scatter_add": _scatter("scatter_add", True)}
