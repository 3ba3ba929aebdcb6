"""Ordering, scans and gathers as dispatcher ops: their schemas (PyTorch's names and
semantics: ``sort`` returns values and indices, ``cumsum`` of an int is int64) and their CPU
kernels, which take and return Tensors.

The computing ops (sort, argsort, searchsorted, cumsum, cumprod, nonzero) run the Numba loops
of sorting.py on the op's axis moved last; the ops that only move memory (flip, roll, tril,
triu, index_select, take, take_along_dim) are NumPy copies, as the shape family's are.  There
are no CUDA kernels yet: on a CUDA tensor the dispatcher raises NoKernelError (README).
"""

from __future__ import annotations

import math

import numpy as np

from dispatch_jit import return_types
from dispatch_jit.dtypes import BOOL, COMPLEX, INT, as_dtype, int64, promote_types, uint64
from dispatch_jit.errors import ArgumentTypeError, AxisError, DTypeError, OutOfBoundsError, ShapeError
from dispatch_jit.tensor import wrap

from ..shape.op import normalize_axes, normalize_axis
from . import sorting

__all__ = ["SCHEMAS", "CPU_KERNELS", "META_KERNELS", "METHODS"]

SCHEMAS = [
    "sort(Tensor self, int dim=-1, bool descending=False, *, bool stable=False) -> (Tensor values, Tensor indices)",
    "argsort(Tensor self, int dim=-1, bool descending=False, *, bool stable=False) -> Tensor",
    "mode(Tensor self, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)",
    "searchsorted.Tensor(Tensor sorted_sequence, Tensor self, *, bool out_int32=False, bool right=False, "
    "str? side=None) -> Tensor",
    "cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor",
    "cumprod(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor",
    "nonzero(Tensor self) -> Tensor",
    "flip(Tensor self, int[] dims) -> Tensor",
    "roll(Tensor self, int[] shifts, int[] dims=[]) -> Tensor",
    "tril(Tensor self, int diagonal=0) -> Tensor",
    "triu(Tensor self, int diagonal=0) -> Tensor",
    "index_select(Tensor self, int dim, Tensor index) -> Tensor",
    "take(Tensor self, Tensor index) -> Tensor",
    "take_along_dim(Tensor self, Tensor indices, int? dim=None) -> Tensor",
]
METHODS = ["sort", "argsort", "mode", "cumsum", "cumprod", "nonzero", "flip", "roll", "tril", "triu", "index_select",
           "take", "take_along_dim"]

# what sort returns, as torch.return_types.sort
SortResult = return_types.named("sort", ("values", "indices"))
ModeResult = return_types.named("mode", ("values", "indices"))

# Numba has no float16 arithmetic and no bool ordering: those rows are sorted as the type
# that holds them exactly, and converted back
_SORT_AS = {np.dtype(np.float16): np.float32, np.dtype(np.bool_): np.uint8}
# running sums and products carry PyTorch's CPU accumulator (at::acc_type): float32 and complex64
# in double precision, float16 in float32, each prefix rounded once to the result dtype (NumPy
# accumulates in the result dtype, so its long float32 scans drift from torch's)
_SCAN_AS = {np.dtype(np.float16): np.float32, np.dtype(np.float32): np.float64,
            np.dtype(np.complex64): np.complex128, np.dtype(np.bool_): np.uint8}


def _real(x, op: str) -> None:
    if x.dtype.category == COMPLEX:
        raise DTypeError(f"{op}: complex tensors are not ordered (got {x.dtype.name}); sort x.real or abs(x)")


def _rows(a: np.ndarray, axis: int) -> tuple[np.ndarray, tuple]:
    """``a`` with ``axis`` last, as a C-contiguous (rows, n) array, and the moved shape."""
    if a.ndim == 0:
        return np.asarray(a.reshape(1, 1), order="C"), ()
    moved = np.moveaxis(a, axis, -1)
    # the row count spelled out: reshape(-1, 0) of an empty array is ambiguous to NumPy
    rows = np.asarray(moved.reshape(math.prod(moved.shape[:-1]), moved.shape[-1]), order="C")
    return rows, moved.shape


def _unrows(r: np.ndarray, moved_shape: tuple, axis: int, ndim: int) -> np.ndarray:
    if ndim == 0:
        return r.reshape(())
    return np.moveaxis(r.reshape(moved_shape), -1, axis)


def _order(x, dim: int, descending: bool, op: str) -> tuple[np.ndarray, int]:
    """The stable sorting permutation along ``dim`` (as an int64 array of x's shape), and the axis.
    Descending and stable: sort the reversed rows ascending and reverse back, so that equal
    elements keep their original order (the array API's rule for stable=True)."""
    _real(x, op)
    a = x._data
    axis = normalize_axis(dim, a.ndim, op)
    rows, moved = _rows(a, axis)
    if rows.dtype in _SORT_AS:
        rows = rows.astype(_SORT_AS[rows.dtype])
    if descending:
        n = rows.shape[1]
        idx = (n - 1) - sorting.argsort_rows(np.asarray(rows[:, ::-1], order="C"))[:, ::-1]
    else:
        idx = sorting.argsort_rows(rows)
    return _unrows(np.asarray(idx, order="C"), moved, axis, a.ndim), axis


def sort(x, dim=-1, descending=False, stable=False):
    idx, axis = _order(x, dim, descending, "sort")
    a = x._data
    values = np.take_along_axis(a, idx, axis) if a.ndim else a.copy()
    return SortResult(wrap(np.asarray(values, order="C")), wrap(np.asarray(idx, order="C")))


def argsort(x, dim=-1, descending=False, stable=False):
    return wrap(np.asarray(_order(x, dim, descending, "argsort")[0], order="C"))


def mode(x, dim=-1, keepdim=False):
    """The most frequent value along ``dim`` (the smallest of those tied) and the index of its last
    occurrence, as torch.mode; NaNs count as one value."""
    _real(x, "mode")
    a = x._data
    axis = normalize_axis(dim, max(a.ndim, 1), "mode")
    if a.ndim and a.shape[axis] == 0:
        raise AxisError(f"mode(): Expected reduction dim {axis} to have non-zero size.")
    idx, _ = _order(x, axis, False, "mode")
    rows, moved = _rows(np.take_along_axis(a, idx, axis) if a.ndim else a, axis)
    if rows.dtype in _SORT_AS:
        rows = rows.astype(_SORT_AS[rows.dtype])
    at = sorting.mode_rows(rows, _rows(idx, axis)[0])
    shape = moved[:-1] if a.ndim else ()
    at = np.moveaxis(at.reshape(shape + (1,)), -1, axis) if a.ndim else at.reshape(())
    values = np.take_along_axis(a, at, axis) if a.ndim else a.copy()
    if not keepdim and a.ndim:
        at, values = np.squeeze(at, axis), np.squeeze(values, axis)
    return ModeResult(wrap(np.array(values, order="C")), wrap(np.array(at, dtype=np.int64, order="C")))


def mode_function(input, dim=-1, keepdim=False):  # noqa: A002  (PyTorch's argument name)
    """The most frequent value of each row of ``input`` along ``dim`` (the smallest of the values
    tied for it) and the index of its last occurrence, as ``torch.mode``; NaNs count as one value.
    Differentiable: the gradient flows to the element the value was read from.

    The execution-mode context manager is ``dj.execution_mode("compiled")``.

    >>> import dispatch_jit as dj
    >>> dj.mode(dj.tensor([[3, 1, 3, 1, 2], [5, 5, 4, 4, 4]]))
    mode(values=tensor([1, 4]), indices=tensor([3, 4]))
    """
    if isinstance(input, str):
        raise ArgumentTypeError(f"dj.mode(input, dim) is torch.mode, the most frequent value of a tensor; "
                                f"for the execution mode write dj.execution_mode({input!r})")
    return _MODE[0](input, dim, keepdim)


_MODE: list = []


def searchsorted(sorted_sequence, x, out_int32=False, right=False, side=None):
    if side is not None:
        if side not in ("left", "right"):
            raise ShapeError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise ShapeError("searchsorted: side='left' and right=True contradict each other; pass one")
        right = side == "right"
    if sorted_sequence.ndim != 1:
        raise ShapeError(f"searchsorted: the sorted sequence must be 1-dimensional here, got shape "
                         f"{tuple(sorted_sequence.shape)}; search each row separately")
    _real(sorted_sequence, "searchsorted")
    _real(x, "searchsorted")
    dt = promote_types(sorted_sequence.dtype, x.dtype).np
    dt = _SORT_AS.get(dt, dt)
    s = np.asarray(sorted_sequence._data, dt, order="C")
    v = np.asarray(x._data, dt, order="C")
    out = sorting.searchsorted(s, v.reshape(-1), bool(right)).reshape(v.shape)
    return wrap(out.astype(np.int32) if out_int32 else out)


def _cumulate(name: str):
    def cumulate(x, dim, dtype=None):
        _ = normalize_axis(dim, x.ndim, name)
        if dtype is not None:
            dt = as_dtype(dtype)
        elif x.dtype.category in (BOOL, INT):
            # integral running sums and products are int64, as PyTorch's (uint64 stays uint64, as
            # dispatch_jit's sum: int64 cannot hold it)
            dt = uint64 if x.dtype is uint64 else int64
        else:
            dt = x.dtype
        a = x._data.astype(dt.np, copy=False)
        axis = normalize_axis(dim, a.ndim, name)
        rows, moved = _rows(a, axis)
        compute = _SCAN_AS.get(rows.dtype)
        r = sorting.cumulate_rows(name, rows.astype(compute) if compute else rows)
        with np.errstate(over="ignore"):    # a wide prefix past the result's range is inf, as torch's, silently
            r = r.astype(dt.np, copy=False)
        return wrap(np.asarray(_unrows(r, moved, axis, a.ndim), order="C"))
    cumulate.__name__ = name
    return cumulate


def nonzero(x):
    a = np.asarray(x._data, order="C").reshape(-1)
    if a.dtype in _SORT_AS:
        a = a.astype(_SORT_AS[a.dtype])
    flat = sorting.nonzero_flat(a)
    if x.ndim == 0:
        return wrap(np.zeros((flat.shape[0], 0), np.int64))
    return wrap(np.ascontiguousarray(np.stack(np.unravel_index(flat, x._data.shape), axis=1).astype(np.int64)))


def _int_list(v) -> tuple:
    # the schema's int[] takes a bare int too (schema.bind, as PyTorch's IntArrayRef): x.flip(1)
    return tuple(v) if isinstance(v, (list, tuple)) else (v,)


def flip(x, dims):
    dims = _int_list(dims)
    axes = normalize_axes(dims, x.ndim, "flip") if len(dims) else ()
    return wrap(np.flip(x._data, axes).copy() if axes else x._data.copy())


def roll(x, shifts, dims=()):
    shifts, dims = _int_list(shifts), _int_list(dims)
    if not dims:
        if len(shifts) != 1:
            raise ShapeError(f"roll: without dims, shifts must be one int, got {list(shifts)}")
        return wrap(np.roll(x._data.reshape(-1), shifts[0]).reshape(x._data.shape))
    if len(shifts) != len(dims):
        raise ShapeError(f"roll: shifts and dims must have the same length, got {list(shifts)} and {list(dims)}")
    axes = tuple(normalize_axis(d, x.ndim, "roll") for d in dims)
    return wrap(np.roll(x._data, shifts, axes))


def _triangle(name: str, fn):
    def tri(x, diagonal=0):
        if x.ndim < 2:
            raise ShapeError(f"{name}: input tensor must have at least 2 dimensions, got shape {tuple(x.shape)}")
        return wrap(fn(x._data, diagonal))
    tri.__name__ = name
    return tri


def _indices(index, size: int, op: str, negative: bool = True) -> np.ndarray:
    """The index tensor's values, checked against the axis size.  Negative ones count from the
    end where PyTorch's op allows them (``take``, ``take_along_dim`` along a dim); elsewhere
    (``index_select``, the flattened ``take_along_dim``) they are out of bounds, as PyTorch's."""
    if index.dtype.category != INT:
        raise DTypeError(f"{op}: indices must be an integer tensor, got {index.dtype.name}")
    i = index._data.astype(np.int64, copy=False)
    lo = -size if negative else 0
    if i.size and (i.min() < lo or i.max() >= size):
        bad = i[(i < lo) | (i >= size)].reshape(-1)[0]
        raise OutOfBoundsError(f"{op}: index out of range in self: index {int(bad)} is out of bounds for an axis "
                               f"of size {size}"
                               + ("" if negative or bad >= 0 else " (negative indices are refused here, as "
                                  "PyTorch's; add the size to count from the end)"))
    return i


def index_select(x, dim, index):
    axis = normalize_axis(dim, x.ndim, "index_select")
    if index.ndim > 1:
        raise ShapeError(f"index_select: index must be 0- or 1-dimensional, got shape {tuple(index.shape)}")
    a = x._data if x.ndim else x._data.reshape(1)
    i = _indices(index, a.shape[axis], "index_select", negative=False).reshape(-1)
    out = np.take(a, i, axis=axis)
    return wrap(out.reshape(()) if x.ndim == 0 else out)


def take(x, index):
    a = x._data.reshape(-1)
    return wrap(np.take(a, _indices(index, a.shape[0], "take")))


def take_along_dim(x, indices, dim=None):
    if dim is None:
        a = x._data.reshape(-1)
        return wrap(np.take(a, _indices(indices, a.shape[0], "take_along_dim", negative=False).reshape(-1)))
    axis = normalize_axis(dim, x.ndim, "take_along_dim")
    if indices.ndim != x.ndim:
        raise ShapeError(f"take_along_dim: indices must have as many dimensions as the input ({x.ndim}), "
                         f"got shape {tuple(indices.shape)}")
    i = _indices(indices, x._data.shape[axis], "take_along_dim")
    try:
        shape = np.broadcast_shapes(tuple(s if k != axis else 1 for k, s in enumerate(x.shape)),
                                    tuple(s if k != axis else 1 for k, s in enumerate(i.shape)))
    except ValueError:
        raise ShapeError(f"take_along_dim: input of shape {tuple(x.shape)} and indices of shape "
                         f"{tuple(indices.shape)} do not broadcast outside axis {axis}") from None
    a = np.broadcast_to(x._data, shape[:axis] + (x._data.shape[axis],) + shape[axis + 1:])
    i = np.broadcast_to(i, shape[:axis] + (i.shape[axis],) + shape[axis + 1:])
    return wrap(np.take_along_axis(a, i, axis))


def index_select_meta(x, dim, index):
    """What a trace learns about index_select without data (its kernel reads the indices to check
    them): x's shape with ``dim`` of the index's length.  The bounds check waits for the run."""
    from dispatch_jit.creation import empty
    if index.dtype.category != INT:
        raise DTypeError(f"index_select: indices must be an integer tensor, got {index.dtype.name}")
    shape = list(x.shape)
    if x.ndim:
        shape[normalize_axis(dim, x.ndim, "index_select")] = index.numel()
    return empty(*shape, dtype=x.dtype, device=x.device)


META_KERNELS = {"index_select": index_select_meta}

CPU_KERNELS = {
    "sort": sort, "argsort": argsort, "mode": mode, "searchsorted": searchsorted, "cumsum": _cumulate("cumsum"),
    "cumprod": _cumulate("cumprod"), "nonzero": nonzero, "flip": flip, "roll": roll,
    "tril": _triangle("tril", np.tril), "triu": _triangle("triu", np.triu), "index_select": index_select,
    "take": take, "take_along_dim": take_along_dim,
}
