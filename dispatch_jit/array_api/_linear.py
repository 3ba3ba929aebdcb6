"""The standard's linear algebra functions of the main namespace (matmul, matrix_transpose,
tensordot, vecdot), over the dispatcher's matmul, permute, reshape and elementwise ops."""

from __future__ import annotations

import math

from dispatch_jit.dtypes import COMPLEX, int64
from dispatch_jit.errors import ShapeError
from dispatch_jit.ops import entries

from ._dtypes import common
from ._manipulation import broadcast_shapes, normalize

__all__ = ["matmul", "matrix_transpose", "tensordot", "vecdot"]

A = entries("aten")


# dtypes the matmul kernels lack: computed in int64, whose wrapping products and sums agree with
# theirs modulo their width, then cast back
_WIDEN = {"uint16", "uint32", "uint64"}


def matmul(x1, x2, /):
    x1, x2 = common(x1, x2)
    if x1.ndim == 0 or x2.ndim == 0:
        raise ShapeError("matmul: zero-dimensional arrays are not allowed; use multiply")
    if x1.dtype.name in _WIDEN:
        dt = x1.dtype
        return A.to(A.matmul(A.to(x1, int64, False), A.to(x2, int64, False)), dt, False)
    return A.matmul(x1, x2)


def matrix_transpose(x, /):
    if x.ndim < 2:
        raise ShapeError(f"matrix_transpose: expected at least 2 dimensions, got shape {tuple(x.shape)}")
    return A.transpose(x, -1, -2)


def tensordot(x1, x2, /, *, axes=2):
    """The sum of products over ``axes`` (an int: the last ones of x1 with the first ones of x2),
    as one matmul of the two operands permuted and reshaped into matrices."""
    x1, x2 = common(x1, x2)
    if isinstance(axes, int):
        if axes < 0 or axes > min(x1.ndim, x2.ndim):
            raise ShapeError(f"tensordot: axes={axes} does not fit shapes {tuple(x1.shape)} and {tuple(x2.shape)}")
        a1, a2 = list(range(x1.ndim - axes, x1.ndim)), list(range(axes))
    else:
        a1 = [normalize(a, x1.ndim) for a in axes[0]]
        a2 = [normalize(a, x2.ndim) for a in axes[1]]
    for i, j in zip(a1, a2):
        if x1.shape[i] != x2.shape[j]:
            raise ShapeError(f"tensordot: axis {i} of x1 (size {x1.shape[i]}) and axis {j} of x2 (size "
                             f"{x2.shape[j]}) differ")
    f1 = [a for a in range(x1.ndim) if a not in a1]
    f2 = [a for a in range(x2.ndim) if a not in a2]
    k = math.prod(x1.shape[a] for a in a1)
    n1 = math.prod(x1.shape[a] for a in f1)
    n2 = math.prod(x2.shape[a] for a in f2)
    m1 = A.reshape(A.permute(x1, f1 + a1), (n1, k))
    m2 = A.reshape(A.permute(x2, a2 + f2), (k, n2))
    out = matmul(m1, m2)
    return A.reshape(out, [x1.shape[a] for a in f1] + [x2.shape[a] for a in f2])


def vecdot(x1, x2, /, *, axis=-1):
    """The dot product along ``axis`` of the broadcast operands, conjugating x1 (the standard's)."""
    x1, x2 = common(x1, x2)
    nd = max(x1.ndim, x2.ndim)
    ax = normalize(axis, nd)
    shape = broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    if ax - nd < -x1.ndim or ax - nd < -x2.ndim or x1.shape[ax - nd] != x2.shape[ax - nd]:
        raise ShapeError(f"vecdot: shapes {tuple(x1.shape)} and {tuple(x2.shape)} differ along axis {axis}")
    prod = A.mul(A.conj(x1), x2) if x1.dtype.category == COMPLEX else A.mul(x1, x2)
    # the standard's vecdot keeps the operands' dtype (a sum would widen small integers)
    return A.sum(A.expand(prod, shape), (ax,), False, dtype=x1.dtype)
