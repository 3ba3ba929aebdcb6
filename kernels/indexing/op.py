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

from dispatch_jit.dtypes import INT
from dispatch_jit.errors import DTypeError, OutOfBoundsError, ShapeError
from dispatch_jit.tensor import Tensor, wrap

from ..shape.op import normalize_axis
from . import cpu

__all__ = ["SCHEMAS", "CPU_KERNELS", "METHODS"]

SCHEMAS = [
    "gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor",
    "scatter(Tensor self, int dim, Tensor index, Tensor src) -> Tensor",
    "scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor",
]
METHODS = ["gather", "scatter", "scatter_add"]

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
    raise OutOfBoundsError(f"{op}: index {bad} is out of bounds for dimension of size {size}")


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


CPU_KERNELS = {"gather": gather, "scatter": _scatter("scatter", False), "scatter_add": _scatter("scatter_add", True)}
