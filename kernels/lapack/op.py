"""The rows: schema -> NumPy function, and the one kernel wrapper that checks dtypes and
wraps results (tuples of results as tuples of tensors)."""

from __future__ import annotations

import numpy as np

from dispatch_jit.dtypes import COMPLEX, FLOAT
from dispatch_jit.errors import DTypeError, InvalidArgumentError, ShapeError
from dispatch_jit.tensor import wrap

__all__ = ["SCHEMAS", "CPU_KERNELS"]


def _square(a, op):
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"{op}: expected a stack of square matrices, got shape {a.shape}")


def _tol(s, rtol, shape, dt):
    """The singular-value cutoff of pinv and matrix_rank: rtol (default max(M, N) * eps) times the largest."""
    r = (max(shape[-2:]) * np.finfo(dt).eps) if rtol is None else rtol
    return np.asarray(r)[..., None] * s.max(axis=-1, keepdims=True) if s.size else np.zeros(s.shape[:-1] + (1,))


def _pinv(a, rtol=None, hermitian=False):
    if 0 in a.shape:
        return np.zeros(a.shape[:-2] + (a.shape[-1], a.shape[-2]), a.dtype)
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    cut = _tol(s, rtol, a.shape, a.dtype)
    sinv = np.where(s > cut, 1.0 / np.where(s > cut, s, 1), 0).astype(s.dtype)
    return np.matmul(np.swapaxes(vh, -1, -2).conj() * sinv[..., None, :], np.swapaxes(u, -1, -2).conj())


def _matrix_rank(a, rtol=None, hermitian=False):
    if 0 in a.shape[-2:]:
        return np.zeros(a.shape[:-2], np.int64)
    s = np.linalg.svd(a, compute_uv=False)
    return np.count_nonzero(s > _tol(s, rtol, a.shape, a.dtype), axis=-1).astype(np.int64)


def _solve(a, b, left=True):
    _square(a, "linalg_solve")
    if not left:    # X A = B is A^T X^T = B^T (PyTorch's left=False; a vector B is a row)
        return _solve(np.swapaxes(a, -1, -2), b) if b.ndim == 1 else \
            np.swapaxes(_solve(np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)
    if b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1]):
        return np.linalg.solve(a, b[..., None])[..., 0]
    return np.linalg.solve(a, b)


def _scipy_fft(name: str):
    import scipy.fft        # imported on first use: SciPy is a dependency, not an import-time cost
    return getattr(scipy.fft, name)


def _fft(name):
    def run(a, n=None, dim=-1, norm=None):
        return _scipy_fft(name)(a, n, dim, norm or "backward")
    return run


def _fftn(name):
    def run(a, s=None, dim=None, norm=None):
        return _scipy_fft(name)(a, None if s is None else tuple(s), None if dim is None else tuple(dim),
                                norm or "backward")
    return run


_SQUARE = {"linalg_inv", "linalg_det", "linalg_slogdet", "linalg_cholesky", "linalg_eigh", "linalg_eigvalsh",
           "linalg_eig", "linalg_eigvals",
           "linalg_matrix_power"}
# ops whose inputs may be integers (the result is computed in the input's dtype)
_ANY_DTYPE = {"linalg_matrix_power", "fft_fftshift", "fft_ifftshift"}

ROWS = {
    "linalg_cholesky(Tensor self, *, bool upper=False) -> Tensor": lambda a, upper=False: np.linalg.cholesky(a, upper=upper),
    "linalg_det(Tensor self) -> Tensor": np.linalg.det,
    "linalg_inv(Tensor self) -> Tensor": np.linalg.inv,
    "linalg_eigh(Tensor self, str UPLO='L') -> (Tensor eigenvalues, Tensor eigenvectors)": np.linalg.eigh,
    "linalg_eigvalsh(Tensor self, str UPLO='L') -> Tensor": np.linalg.eigvalsh,
    # eig and eigvals: complex results always (a real matrix may have complex eigenvalues)
    "linalg_eig(Tensor self) -> (Tensor eigenvalues, Tensor eigenvectors)":
        lambda a: tuple(v.astype(np.result_type(v.dtype, np.complex64)) for v in np.linalg.eig(a)),
    "linalg_eigvals(Tensor self) -> Tensor": lambda a: np.linalg.eigvals(a).astype(np.result_type(a.dtype, np.complex64)),
    "linalg_qr(Tensor self, str mode='reduced') -> (Tensor Q, Tensor R)": np.linalg.qr,
    "linalg_slogdet(Tensor self) -> (Tensor sign, Tensor logabsdet)": np.linalg.slogdet,
    "linalg_solve(Tensor self, Tensor B, *, bool left=True) -> Tensor": _solve,
    "linalg_svd(Tensor self, bool full_matrices=True) -> (Tensor U, Tensor S, Tensor Vh)":
        lambda a, full_matrices=True: np.linalg.svd(a, full_matrices=full_matrices),
    "linalg_svdvals(Tensor self) -> Tensor": lambda a: np.linalg.svd(a, compute_uv=False),
    # rtol: a number, or an array broadcasting against the stack of matrices (the standard's)
    "linalg_pinv(Tensor self, *, Tensor? rtol=None, bool hermitian=False) -> Tensor": _pinv,
    "linalg_matrix_rank(Tensor self, *, Tensor? rtol=None, bool hermitian=False) -> Tensor": _matrix_rank,
    "linalg_matrix_power(Tensor self, int n) -> Tensor": np.linalg.matrix_power,
    "fft_fft(Tensor self, int? n=None, int dim=-1, str? norm=None) -> Tensor": _fft("fft"),
    "fft_ifft(Tensor self, int? n=None, int dim=-1, str? norm=None) -> Tensor": _fft("ifft"),
    "fft_rfft(Tensor self, int? n=None, int dim=-1, str? norm=None) -> Tensor": _fft("rfft"),
    "fft_irfft(Tensor self, int? n=None, int dim=-1, str? norm=None) -> Tensor": _fft("irfft"),
    "fft_hfft(Tensor self, int? n=None, int dim=-1, str? norm=None) -> Tensor": _fft("hfft"),
    "fft_ihfft(Tensor self, int? n=None, int dim=-1, str? norm=None) -> Tensor": _fft("ihfft"),
    "fft_fftn(Tensor self, int[]? s=None, int[]? dim=None, str? norm=None) -> Tensor": _fftn("fftn"),
    "fft_ifftn(Tensor self, int[]? s=None, int[]? dim=None, str? norm=None) -> Tensor": _fftn("ifftn"),
    "fft_rfftn(Tensor self, int[]? s=None, int[]? dim=None, str? norm=None) -> Tensor": _fftn("rfftn"),
    "fft_irfftn(Tensor self, int[]? s=None, int[]? dim=None, str? norm=None) -> Tensor": _fftn("irfftn"),
    "fft_fftshift(Tensor self, int[]? dim=None) -> Tensor":
        lambda a, dim=None: _scipy_fft("fftshift")(a, None if dim is None else tuple(dim)),
    "fft_ifftshift(Tensor self, int[]? dim=None) -> Tensor":
        lambda a, dim=None: _scipy_fft("ifftshift")(a, None if dim is None else tuple(dim)),
}
SCHEMAS = list(ROWS)


def _kernel(name: str, fn):
    def kernel(x, *args, **kwargs):
        if name not in _ANY_DTYPE and x.dtype.category not in (FLOAT, COMPLEX):
            raise DTypeError(f"{name}: expected a floating point or complex tensor, got {x.dtype.name}; "
                             f"convert first: x.to(dj.float64)")
        if name in _SQUARE:
            _square(x._data, name)
        arrays = [a._data if hasattr(a, "_data") else a for a in args]
        kwargs = {k: v._data if hasattr(v, "_data") else v for k, v in kwargs.items()}
        try:
            r = fn(x._data, *arrays, **kwargs)
        except np.linalg.LinAlgError as e:
            raise InvalidArgumentError(f"{name}: {e}") from None
        out_dt = x._data.dtype
        if isinstance(r, tuple):
            return tuple(wrap(np.asarray(_keep(v, out_dt), order="C")) for v in r)
        return wrap(np.asarray(_keep(r, out_dt), order="C"))
    kernel.__name__ = name
    return kernel


def _keep(v, dt):
    """NumPy's result at the input's precision: single precision in, single precision out."""
    v = np.asarray(v)
    if dt in (np.float32, np.complex64) and v.dtype.kind in "fc":
        return v.astype(np.complex64 if v.dtype.kind == "c" else np.float32, copy=False)
    return v


CPU_KERNELS = {s.split("(")[0]: _kernel(s.split("(")[0], fn) for s, fn in ROWS.items()}
