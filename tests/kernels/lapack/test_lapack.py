"""The linalg_* and fft_* ops (kernels/lapack): NumPy's LAPACK and pocketfft at the CPU key, results at
the input's precision, errors for integer inputs and non-square matrices."""

from __future__ import annotations

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import DTypeError, ShapeError

A = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
OPS = dj.ops.aten

# op -> (call on a tensor, NumPy reference on an array)
ORACLE = {
    "det": (lambda t: OPS.linalg_det(t), np.linalg.det),
    "inv": (lambda t: OPS.linalg_inv(t), np.linalg.inv),
    "cholesky": (lambda t: OPS.linalg_cholesky(t), np.linalg.cholesky),
    "eigvalsh": (lambda t: OPS.linalg_eigvalsh(t), np.linalg.eigvalsh),
    "svdvals": (lambda t: OPS.linalg_svdvals(t), lambda a: np.linalg.svd(a, compute_uv=False)),
    "slogdet": (lambda t: OPS.linalg_slogdet(t)[1], lambda a: np.linalg.slogdet(a)[1]),
    "solve": (lambda t: OPS.linalg_solve(t, dj.ones(3, dtype=t.dtype)), lambda a: np.linalg.solve(a, np.ones(3))),
    "pinv": (lambda t: OPS.linalg_pinv(t), np.linalg.pinv),
    "matrix_rank": (lambda t: OPS.linalg_matrix_rank(t), np.linalg.matrix_rank),
    "fft": (lambda t: OPS.fft_fft(t), np.fft.fft),
    "rfftn": (lambda t: OPS.fft_rfftn(t), np.fft.rfftn),
    "fftshift": (lambda t: OPS.fft_fftshift(t), np.fft.fftshift),
}


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(ORACLE))
def test_op_matches_numpy(name, dt):
    fn, ref = ORACLE[name]
    got = fn(dj.from_numpy(A.astype(dt))).numpy()
    want = np.asarray(ref(A))
    if want.dtype.kind in "fc":
        # single precision in, single precision out
        assert got.dtype.itemsize == want.dtype.itemsize // (2 if dt == "float32" else 1)
    np.testing.assert_allclose(got, want, rtol=1e-5 if dt == "float32" else 1e-12, atol=1e-6)


def test_tuple_results():
    q, r = OPS.linalg_qr(dj.from_numpy(A))
    np.testing.assert_allclose((q.numpy() @ r.numpy()), A, atol=1e-12)
    w, v = OPS.linalg_eigh(dj.from_numpy(A))
    np.testing.assert_allclose(v.numpy() @ np.diag(w.numpy()) @ v.numpy().T, A, atol=1e-12)


def test_errors():
    with pytest.raises(DTypeError, match="linalg_inv: expected a floating point"):
        OPS.linalg_inv(dj.tensor([[1, 2], [3, 4]]))
    with pytest.raises(ShapeError, match="square"):
        OPS.linalg_det(dj.zeros(2, 3))
    with pytest.raises(ValueError, match="linalg_inv"):
        OPS.linalg_inv(dj.zeros(2, 2))          # singular: NumPy's LinAlgError, named
