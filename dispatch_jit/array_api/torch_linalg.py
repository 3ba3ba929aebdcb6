"""``dj.linalg``: ``torch.linalg``'s functions, with PyTorch's names, signatures and defaults, over the
lapack family's ``linalg_*`` ops and the array API namespace's norms (``dispatch_jit/array_api``).

>>> import dispatch_jit as dj
>>> A = dj.tensor([[2.0, 0.0], [0.0, 4.0]])
>>> dj.linalg.inv(A), dj.linalg.norm(dj.tensor([3.0, 4.0]))
(tensor([[0.5000, 0.0000],
        [0.0000, 0.2500]]), tensor(5.))
"""

from __future__ import annotations

from dispatch_jit.errors import InvalidArgumentError, SchemaError, ShapeError
from dispatch_jit.ops import entries
from dispatch_jit.registry import lookup
from dispatch_jit.return_types import named

from . import linalg as _xp
from ._manipulation import normalize
from .torch_linalg_products import multi_dot, vander

__all__ = ["norm", "vector_norm", "matrix_norm", "inv", "det", "slogdet", "solve", "eigh", "eigvalsh", "eig",
           "eigvals", "svd", "svdvals", "qr", "cholesky", "pinv", "matrix_rank", "matrix_power", "cross",
           "diagonal", "vecdot", "matmul", "multi_dot", "vander"]

_ops = entries("aten")
# PyTorch's named results (torch.return_types.linalg_eigh, ...)
_EIGH = named("linalg_eigh", ("eigenvalues", "eigenvectors"))
_EIG = named("linalg_eig", ("eigenvalues", "eigenvectors"))
_SLOGDET = named("linalg_slogdet", ("sign", "logabsdet"))
_QR = named("linalg_qr", ("Q", "R"))
_SVD = named("linalg_svd", ("U", "S", "Vh"))


def _no_out(name: str, out) -> None:
    if out is not None:
        raise SchemaError(f"linalg.{name}: out= is not supported by dispatch_jit; assign the result instead")


def _cast(x, dtype):
    return x if dtype is None else x.to(dtype)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):  # noqa: A002
    """The ``ord``-norm of the vectors along ``dim`` (every element by default), as ``torch.linalg.vector_norm``.

    >>> import dispatch_jit as dj
    >>> dj.linalg.vector_norm(dj.tensor([[3.0, -4.0]]), ord=1, dim=1)
    tensor([7.])
    """
    _no_out("vector_norm", out)
    return _xp.vector_norm(_cast(x, dtype), axis=dim, keepdims=keepdim, ord=ord)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):  # noqa: A002,N803
    """The ``ord``-norm ("fro", "nuc", 1, -1, 2, -2, inf, -inf) of the matrices over ``dim``.

    >>> import dispatch_jit as dj
    >>> dj.linalg.matrix_norm(dj.tensor([[1.0, -2.0], [3.0, 4.0]]), ord=1)
    tensor(6.)
    """
    _no_out("matrix_norm", out)
    x = _cast(A, dtype)
    if len(dim) != 2:
        raise ShapeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {tuple(dim)}")
    d = [normalize(a, x.ndim) for a in dim]
    if d[0] == d[1]:
        raise ShapeError(f"linalg.matrix_norm: dims must be different. Got ({dim[0]}, {dim[1]})")
    rest = [k for k in range(x.ndim) if k not in d]
    r = _xp.matrix_norm(_ops.permute(x, rest + d), keepdims=False, ord=ord)
    if keepdim:
        for k in sorted(d):
            r = _ops.unsqueeze(r, k)
    return r


def norm(A, ord=None, dim=None, keepdim=False, *, out=None, dtype=None):  # noqa: A002,N803
    """``torch.linalg.norm``: a vector norm (``dim`` an int, or a 1-D input) or a matrix norm (``dim`` a
    2-tuple, or a 2-D input); with neither ``ord`` nor ``dim``, the 2-norm of all elements.

    >>> import dispatch_jit as dj
    >>> dj.linalg.norm(dj.tensor([[1.0, 2.0], [2.0, 4.0]]))
    tensor(5.)
    """
    _no_out("norm", out)
    x = _cast(A, dtype)
    if dim is None and ord is None:
        return vector_norm(x, 2, None, keepdim)
    if dim is None:
        if x.ndim not in (1, 2):
            raise ShapeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. "
                             f"Got {x.ndim}D.")
        dim = (0,) if x.ndim == 1 else (0, 1)
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if len(dims) == 1:
        return vector_norm(x, 2 if ord is None else ord, dims, keepdim)
    if len(dims) == 2:
        return matrix_norm(x, "fro" if ord is None else ord, dims, keepdim)
    raise ShapeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {list(dims)}")


def _wrap_op(name: str, doc: str, result=None):
    op = lookup(f"aten::linalg_{name}").entry

    def fn(A, *, out=None):  # noqa: N803
        _no_out(name, out)
        return op(A) if result is None else result(*op(A))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


inv = _wrap_op("inv", "The inverse of each square matrix, as ``torch.linalg.inv``.")
det = _wrap_op("det", "The determinant of each square matrix, as ``torch.linalg.det``.")
slogdet = _wrap_op("slogdet", "``(sign, logabsdet)`` of each square matrix's determinant, as ``torch.linalg.slogdet``.",
              _SLOGDET)
eig = _wrap_op("eig", "``(eigenvalues, eigenvectors)`` (complex) of each square matrix, as ``torch.linalg.eig``.", _EIG)
eigvals = _wrap_op("eigvals", "The (complex) eigenvalues of each square matrix, as ``torch.linalg.eigvals``.")


def solve(A, B, *, left=True, out=None):  # noqa: N803
    """The solution X of ``A X = B`` (``left=False``: ``X A = B``), as ``torch.linalg.solve``."""
    _no_out("solve", out)
    return _ops.linalg_solve(A, B, left=left)


def eigh(A, UPLO="L", *, out=None):  # noqa: N803
    """``(eigenvalues, eigenvectors)`` of each Hermitian matrix, read from its ``UPLO`` triangle."""
    _no_out("eigh", out)
    return _EIGH(*_ops.linalg_eigh(A, UPLO))


def eigvalsh(A, UPLO="L", *, out=None):  # noqa: N803
    """The eigenvalues of each Hermitian matrix, ascending, read from its ``UPLO`` triangle."""
    _no_out("eigvalsh", out)
    return _ops.linalg_eigvalsh(A, UPLO)


def svd(A, full_matrices=True, *, driver=None, out=None):  # noqa: N803
    """``(U, S, Vh)`` of each matrix, as ``torch.linalg.svd`` (``driver`` is CUDA-only in PyTorch: None here)."""
    _no_out("svd", out)
    _no_driver(driver)
    return _SVD(*_ops.linalg_svd(A, full_matrices))


def svdvals(A, *, driver=None, out=None):  # noqa: N803
    """The singular values of each matrix, descending."""
    _no_out("svdvals", out)
    _no_driver(driver)
    return _ops.linalg_svdvals(A)


def _no_driver(driver) -> None:
    if driver is not None:
        raise InvalidArgumentError(f"linalg.svd: driver={driver!r} chooses a cuSOLVER routine (CUDA only in "
                                   f"PyTorch); leave it None")


def qr(A, mode="reduced", *, out=None):  # noqa: N803
    """``(Q, R)`` of each matrix; ``mode`` "reduced", "complete" or "r", as ``torch.linalg.qr``."""
    _no_out("qr", out)
    if mode not in ("reduced", "complete", "r"):
        raise InvalidArgumentError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' "
                                   f"(default), 'r', or 'complete'")
    if mode == "r":
        from dispatch_jit.creation import empty
        r = _ops.linalg_qr(A, "reduced")[1]
        return _QR(empty(0, dtype=r.dtype, device=r.device), r)   # PyTorch's mode="r": an empty Q
    return _QR(*_ops.linalg_qr(A, mode))


def cholesky(A, *, upper=False, out=None):  # noqa: N803
    """The Cholesky factor of each Hermitian positive-definite matrix (lower, or ``upper``)."""
    _no_out("cholesky", out)
    return _ops.linalg_cholesky(A, upper=upper)


def _tol(name: str, atol, rtol):
    if atol is not None:
        raise InvalidArgumentError(f"linalg.{name}: atol= is not supported by dispatch_jit; pass rtol (relative "
                                   f"to the largest singular value) instead")
    if rtol is not None and not hasattr(rtol, "dtype"):
        from dispatch_jit.creation import tensor
        rtol = tensor(float(rtol), dtype=_float64())
    return rtol


def _float64():
    from dispatch_jit.dtypes import float64
    return float64


def _lower_hermitian(A):  # noqa: N803
    """The Hermitian matrix of ``A``'s lower triangle: PyTorch's ``hermitian=True`` reads only that
    triangle (its eigh's UPLO='L'), so a matrix outside the contract gives the same answer here."""
    low = A.tril(-1)
    upper = low.transpose(-2, -1)
    if not A.dtype.is_complex:
        return A.tril() + upper
    # LAPACK's Hermitian routines take the diagonal as real: its imaginary part is not read either
    return low + upper.conj() + (A.tril() - low).real


def pinv(A, *, atol=None, rtol=None, hermitian=False, out=None):  # noqa: N803
    """The pseudo-inverse of each matrix, singular values below ``rtol`` times the largest dropped;
    with ``hermitian=True`` only the lower triangle is read, as PyTorch's."""
    _no_out("pinv", out)
    if hermitian:
        A = _lower_hermitian(A)  # noqa: N806
    return _ops.linalg_pinv(A, rtol=_tol("pinv", atol, rtol), hermitian=hermitian)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False, out=None):  # noqa: N803
    """The number of singular values of each matrix above ``rtol`` times the largest."""
    _no_out("matrix_rank", out)
    return _ops.linalg_matrix_rank(A, rtol=_tol("matrix_rank", atol, rtol), hermitian=hermitian)


def matrix_power(A, n, *, out=None):  # noqa: N803
    """Each square matrix to the integer power ``n`` (negative: of its inverse)."""
    _no_out("matrix_power", out)
    return _ops.linalg_matrix_power(A, n)


def cross(input, other, *, dim=-1, out=None):  # noqa: A002
    """The cross product of 3-vectors along ``dim`` (default the last), as ``torch.linalg.cross``."""
    _no_out("cross", out)
    return _ops.cross(input, other, dim)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):  # noqa: N803
    """The ``offset``-th diagonal over ``dim1``/``dim2`` (default the last two), as ``torch.linalg.diagonal``."""
    return _ops.diagonal(A, offset, dim1, dim2)


def vecdot(x, y, *, dim=-1, out=None):
    """``sum(conj(x) * y)`` along ``dim``, as ``torch.linalg.vecdot``."""
    _no_out("vecdot", out)
    return _xp.vecdot(x, y, axis=dim)


def matmul(input, other, *, out=None):  # noqa: A002
    """The matrix product, as ``torch.linalg.matmul`` (``torch.matmul``)."""
    _no_out("matmul", out)
    return _ops.matmul(input, other)

