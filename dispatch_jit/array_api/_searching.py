"""The standard's searching, sorting, set and indexing functions, over the dispatcher's ops
(argmax, where, and the arrayops family: sort, argsort, searchsorted, nonzero, index_select,
take_along_dim, cumsum).  The set functions are compositions: a stable argsort groups equal
values, and each result is a gather (NaNs are distinct, as the standard says)."""

from __future__ import annotations

from collections import namedtuple

from dispatch_jit.creation import tensor
from dispatch_jit.dtypes import COMPLEX, int64
from dispatch_jit.errors import ArgumentTypeError, AxisError, InvalidArgumentError, ShapeError
from dispatch_jit.ops import entries
from dispatch_jit.tensor import Tensor

from ._dtypes import common
from ._manipulation import normalize

__all__ = ["argmax", "argmin", "nonzero", "searchsorted", "where", "sort", "argsort", "unique_all", "unique_counts",
           "unique_inverse", "unique_values", "isin", "take", "take_along_axis"]

A = entries("aten")

UniqueAll = namedtuple("UniqueAll", ["values", "indices", "inverse_indices", "counts"])
UniqueCounts = namedtuple("UniqueCounts", ["values", "counts"])
UniqueInverse = namedtuple("UniqueInverse", ["values", "inverse_indices"])


def argmax(x, /, *, axis=None, keepdims=False):
    return A.argmax(x, axis, keepdims)


def argmin(x, /, *, axis=None, keepdims=False):
    return A.argmin(x, axis, keepdims)


def nonzero(x, /):
    """A tuple of index arrays, one per dimension (PyTorch's ``nonzero`` gives their columns)."""
    if x.ndim == 0:
        raise ShapeError("nonzero: a zero-dimensional array has no indices; reshape it to 1 dimension first")
    idx = A.nonzero(x)
    return tuple(A.clone(A.squeeze(A.narrow(idx, 1, i, 1), (1,))) for i in range(x.ndim))


def where(condition, x1, x2, /):
    if not isinstance(x1, Tensor) and not isinstance(x2, Tensor):
        raise ArgumentTypeError("where: at least one of x1 and x2 must be an array")
    x1, x2 = common(x1, x2)
    return A.where(condition, x1, x2)


def sort(x, /, *, axis=-1, descending=False, stable=True):
    return A.sort(x, normalize(axis, max(x.ndim, 1)), descending, stable=stable)[0]


def argsort(x, /, *, axis=-1, descending=False, stable=True):
    return A.argsort(x, normalize(axis, max(x.ndim, 1)), descending, stable=stable)


def searchsorted(x1, x2, /, *, side="left", sorter=None):
    if side not in ("left", "right"):
        raise InvalidArgumentError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if x1.ndim != 1:
        raise ShapeError(f"searchsorted: x1 must be 1-dimensional, got shape {tuple(x1.shape)}")
    if sorter is not None:
        x1 = A.index_select(x1, 0, sorter)
    if not isinstance(x2, Tensor):
        x2 = tensor(x2, dtype=x1.dtype)
    x1, x2 = common(x1, x2)
    return A.searchsorted(x1, x2, side=side)


def _groups(x):
    """(sorted values, the sorting permutation, each sorted element's group, the groups' starts)."""
    flat = A.reshape(x, (-1,))
    if x.dtype.category == COMPLEX:
        # complex values in lexicographic order (real, then imaginary): two stable sorts
        by_imag = A.argsort(A.imag(flat), 0, False, stable=True)
        perm = A.index_select(by_imag, 0, A.argsort(A.index_select(A.real(flat), 0, by_imag), 0, False,
                                                    stable=True))
    else:
        perm = A.argsort(flat, 0, False, stable=True)
    s = A.index_select(flat, 0, perm)
    n = s.shape[0]
    head = tensor([n > 0], device=x.device)[: min(n, 1)]
    # a new group starts where a value differs from the one before (each NaN differs from every value)
    new = A.cat([head, A.ne(A.narrow(s, 0, 1, n - 1), A.narrow(s, 0, 0, n - 1))], 0) if n else head
    group = A.sub(A.cumsum(new, 0), 1)
    starts = A.reshape(A.nonzero(new), (-1,))
    return s, perm, group, starts


def unique_values(x, /):
    s, _, _, starts = _groups(x)
    return A.index_select(s, 0, starts)


def _counts(starts, n, device):
    ends = A.cat([A.narrow(starts, 0, 1, starts.shape[0] - 1), tensor([n], dtype=int64, device=device)], 0) \
        if starts.shape[0] else starts
    return A.sub(ends, starts)


def unique_counts(x, /):
    s, _, _, starts = _groups(x)
    return UniqueCounts(A.index_select(s, 0, starts), _counts(starts, s.shape[0], x.device))


def unique_inverse(x, /):
    s, perm, group, starts = _groups(x)
    inverse = A.reshape(A.index_select(group, 0, A.argsort(perm, 0, False)), tuple(x.shape))
    return UniqueInverse(A.index_select(s, 0, starts), inverse)


def unique_all(x, /):
    s, perm, group, starts = _groups(x)
    inverse = A.reshape(A.index_select(group, 0, A.argsort(perm, 0, False)), tuple(x.shape))
    return UniqueAll(A.index_select(s, 0, starts), A.index_select(perm, 0, starts), inverse,
                     _counts(starts, s.shape[0], x.device))


def isin(x1, x2, /, *, invert=False):
    """Whether each element of ``x1`` is in ``x2`` (NaN is in nothing): a binary search of the
    sorted ``x2``."""
    if not isinstance(x1, Tensor):
        x1 = tensor(x1, dtype=x2.dtype)
    if not isinstance(x2, Tensor):
        x2 = tensor(x2, dtype=x1.dtype)
    x1, x2 = common(x1, x2)
    s = A.sort(A.reshape(x2, (-1,)), 0, False)[0]
    n = s.shape[0]
    if n == 0:
        from dispatch_jit.creation import zeros
        found = zeros(tuple(x1.shape), dtype="bool", device=x1.device)
    else:
        pos = A.clamp(A.searchsorted(s, x1), None, n - 1)
        found = A.eq(A.reshape(A.index_select(s, 0, A.reshape(pos, (-1,))), tuple(x1.shape)), x1)
    return A.logical_not(found) if invert else found


def take(x, indices, /, *, axis=None):
    if axis is None:
        if x.ndim != 1:
            raise AxisError(f"take: axis is required for a {x.ndim}-dimensional array")
        axis = 0
    axis = normalize(axis, x.ndim)
    # the standard counts a negative index from the end; index_select refuses it, as PyTorch's
    n = x.shape[axis]
    return A.index_select(x, axis, A.where(A.lt(indices, 0), A.add(indices, n), indices))


def take_along_axis(x, indices, /, *, axis=-1):
    return A.take_along_dim(x, indices, normalize(axis, x.ndim))
