"""The standard's ``linalg`` extension: LAPACK-backed ops (the ``linalg_*`` ops of the lapack
kernel family, NumPy's LAPACK at the CPU key) and compositions of the dispatcher's ops.

>>> from dispatch_jit import array_api as xp
>>> a = xp.asarray([[4.0, 1.0], [1.0, 3.0]], dtype=xp.float64)
>>> round(float(xp.linalg.det(a)), 9)
11.0
"""

from __future__ import annotations

import math
from collections import namedtuple

from dispatch_jit.dtypes import COMPLEX, FLOAT
from dispatch_jit.errors import DTypeError, InvalidArgumentError, ShapeError
from dispatch_jit.ops import entries

from ._dtypes import common
from ._linear import matmul, matrix_transpose, tensordot, vecdot
from ._manipulation import normalize

__all__ = ["cholesky", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv", "matmul", "matrix_norm",
           "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv", "qr", "slogdet", "solve", "svd",
           "svdvals", "tensordot", "trace", "vecdot", "vector_norm"]

A = entries("aten")
EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
EigResult = namedtuple("EigResult", ["eigenvalues", "eigenvectors"])
QRResult = namedtuple("QRResult", ["Q", "R"])
SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])


def cholesky(x, /, *, upper=False):
    return A.linalg_cholesky(x, upper=upper)


def det(x, /):
    return A.linalg_det(x)


def inv(x, /):
    return A.linalg_inv(x)


def eigh(x, /):
    return EighResult(*A.linalg_eigh(x))


def eig(x, /):
    return EigResult(*A.linalg_eig(x))


def eigvals(x, /):
    return A.linalg_eigvals(x)


def eigvalsh(x, /):
    return A.linalg_eigvalsh(x)


def qr(x, /, *, mode="reduced"):
    if mode not in ("reduced", "complete"):
        raise InvalidArgumentError(f"qr: mode must be 'reduced' or 'complete', got {mode!r}")
    return QRResult(*A.linalg_qr(x, mode))


def slogdet(x, /):
    return SlogdetResult(*A.linalg_slogdet(x))


def solve(x1, x2, /):
    x1, x2 = common(x1, x2)
    return A.linalg_solve(x1, x2)


def svd(x, /, *, full_matrices=True):
    return SVDResult(*A.linalg_svd(x, full_matrices))


def svdvals(x, /):
    return A.linalg_svdvals(x)


def pinv(x, /, *, rtol=None):
    return A.linalg_pinv(x, rtol=rtol)


def matrix_rank(x, /, *, rtol=None):
    return A.linalg_matrix_rank(x, rtol=rtol)


def matrix_power(x, n, /):
    return A.linalg_matrix_power(x, n)


def diagonal(x, /, *, offset=0):
    """The diagonal of each matrix (the last two axes), a copy."""
    if x.ndim < 2:
        raise ShapeError(f"diagonal: expected at least 2 dimensions, got shape {tuple(x.shape)}")
    from dispatch_jit.tensor import wrap
    import numpy as np
    return wrap(np.asarray(np.diagonal(x.numpy(), offset, -2, -1), order="C"))


def trace(x, /, *, offset=0, dtype=None):
    from ._statistics import sum as _sum
    return _sum(diagonal(x, offset=offset), axis=-1, dtype=dtype)


def outer(x1, x2, /):
    if x1.ndim != 1 or x2.ndim != 1:
        raise ShapeError(f"outer: expected two 1-dimensional arrays, got shapes {tuple(x1.shape)} and {tuple(x2.shape)}")
    x1, x2 = common(x1, x2)
    return A.mul(A.unsqueeze(x1, 1), A.unsqueeze(x2, 0))


def cross(x1, x2, /, *, axis=-1):
    """The cross product of 3-vectors along ``axis`` of the broadcast operands."""
    from ._manipulation import broadcast_arrays
    x1, x2 = broadcast_arrays(*common(x1, x2))
    ax = normalize(axis, x1.ndim)
    if x1.shape[ax] != 3:
        raise ShapeError(f"cross: axis {axis} must have size 3, got shape {tuple(x1.shape)}")
    a = [A.narrow(x1, ax, i, 1) for i in range(3)]
    b = [A.narrow(x2, ax, i, 1) for i in range(3)]
    parts = [A.sub(A.mul(a[1], b[2]), A.mul(a[2], b[1])), A.sub(A.mul(a[2], b[0]), A.mul(a[0], b[2])),
             A.sub(A.mul(a[0], b[1]), A.mul(a[1], b[0]))]
    return A.cat(parts, ax)


def _real_float(x, op):
    if x.dtype.category not in (FLOAT, COMPLEX):
        raise DTypeError(f"{op}: expected a floating point or complex array, got {x.dtype.name}")


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):  # noqa: A002
    """The ``ord``-norm of the vectors along ``axis`` (all elements by default)."""
    _real_float(x, "vector_norm")
    axes = None if axis is None else tuple(normalize(a, x.ndim) for a in ((axis,) if isinstance(axis, int) else axis))
    a = A.abs(x)
    if axes == ():
        # no axis reduced: each element is its own vector (the top level's sum would read () as "all")
        return A.to(A.ne(a, 0), a.dtype, False) if ord == 0 else a
    if ord == math.inf:
        r = A.max(a, list(range(x.ndim)) if axes is None else axes, keepdims) if a.numel() else A.sum(a, axes, keepdims)
    elif ord == -math.inf:
        r = A.min(a, list(range(x.ndim)) if axes is None else axes, keepdims)
    elif ord == 0:
        r = A.sum(A.to(A.ne(a, 0), a.dtype, False), axes, keepdims)
    elif ord == 1:
        r = A.sum(a, axes, keepdims)
    elif ord == 2:
        r = A.sqrt(A.sum(A.mul(a, a), axes, keepdims))
    else:
        r = A.pow(A.sum(A.pow(a, float(ord)), axes, keepdims), 1.0 / float(ord))
    if axes is None and keepdims:
        r = A.reshape(r, (1,) * x.ndim)
    return r


def matrix_norm(x, /, *, keepdims=False, ord="fro"):  # noqa: A002
    _real_float(x, "matrix_norm")
    if x.ndim < 2:
        raise ShapeError(f"matrix_norm: expected at least 2 dimensions, got shape {tuple(x.shape)}")
    a = A.abs(x)
    if ord == "fro":
        r = A.sqrt(A.sum(A.mul(a, a), (-2, -1), keepdims))
    elif ord == "nuc":
        r = A.sum(svdvals(x), (-1,), False)
    elif ord in (1, -1, math.inf, -math.inf):
        s = A.sum(a, (-2,) if ord in (1, -1) else (-1,), False)
        r = (A.max if ord > 0 else A.min)(s, (-1,), False)
    elif ord in (2, -2):
        s = svdvals(x)
        r = (A.max if ord > 0 else A.min)(s, (-1,), False)
    else:
        raise InvalidArgumentError(f"matrix_norm: ord must be 'fro', 'nuc', 1, -1, 2, -2, inf or -inf; got {ord!r}")
    if keepdims and ord != "fro":
        r = A.unsqueeze(A.unsqueeze(r, -1), -1)
    return r
