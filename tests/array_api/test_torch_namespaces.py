"""dj.linalg, dj.fft, dj.special (dispatch_jit/array_api/torch_*.py): PyTorch's names, argument names and
defaults, values against PyTorch when installed and NumPy always, importable as modules, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import InvalidArgumentError, SchemaError, ShapeError

RNG = np.random.default_rng(5)
M = RNG.standard_normal((3, 3))
SPD = M @ M.T + 3 * np.eye(3)
B3 = RNG.standard_normal((2, 3, 4))
V = RNG.standard_normal(8)
P = np.array([0.1, 0.5, 0.9, 0.0])

# name -> (call on a namespace-holding module m (dj or torch), arrays)
CASES = {
    "norm": (lambda m, a: m.linalg.norm(a), (B3,)),
    "norm-ord-dim": (lambda m, a: m.linalg.norm(a, 1, dim=1, keepdim=True), (B3,)),
    "norm-matrix": (lambda m, a: m.linalg.norm(a, "nuc"), (M,)),
    "norm-matrix-dim": (lambda m, a: m.linalg.norm(a, math.inf, dim=(0, 2)), (B3,)),
    "vector_norm": (lambda m, a: m.linalg.vector_norm(a, 3, dim=(0, 2)), (B3,)),
    "vector_norm-inf": (lambda m, a: m.linalg.vector_norm(a, -math.inf), (B3,)),
    "matrix_norm": (lambda m, a: m.linalg.matrix_norm(a), (B3,)),
    "matrix_norm-dim": (lambda m, a: m.linalg.matrix_norm(a, -1, dim=(2, 0), keepdim=True), (B3,)),
    "inv": (lambda m, a: m.linalg.inv(a), (M,)),
    "det": (lambda m, a: m.linalg.det(a), (M,)),
    "slogdet": (lambda m, a: m.linalg.slogdet(a).logabsdet, (M,)),
    "solve": (lambda m, a, b: m.linalg.solve(a, b), (M, B3[0, :, :3])),
    "solve-right": (lambda m, a, b: m.linalg.solve(a, b, left=False), (M, B3[0, :, :3])),
    "eigvalsh": (lambda m, a: m.linalg.eigvalsh(a), (SPD,)),
    "eigvalsh-U": (lambda m, a: m.linalg.eigvalsh(a, UPLO="U"), (np.triu(SPD) + 5 * np.tril(SPD, -1),)),
    "eigh-values": (lambda m, a: m.linalg.eigh(a).eigenvalues, (SPD,)),
    "svdvals": (lambda m, a: m.linalg.svdvals(a), (B3,)),
    "svd-S": (lambda m, a: m.linalg.svd(a, full_matrices=False).S, (B3,)),
    "qr-R-abs": (lambda m, a: m.linalg.qr(a).R.abs(), (M,)),
    "qr-r-mode": (lambda m, a: m.linalg.qr(a, mode="r")[1].abs(), (B3[0],)),
    "cholesky": (lambda m, a: m.linalg.cholesky(a), (SPD,)),
    "cholesky-upper": (lambda m, a: m.linalg.cholesky(a, upper=True), (SPD,)),
    "pinv": (lambda m, a: m.linalg.pinv(a), (B3[0],)),
    "matrix_rank": (lambda m, a: m.linalg.matrix_rank(a), (np.outer(V[:3], V[3:6]),)),
    "matrix_power": (lambda m, a: m.linalg.matrix_power(a, -2), (M,)),
    "cross": (lambda m, a, b: m.linalg.cross(a, b), (B3[:, :, :3], B3[:, :, 1:])),
    "diagonal": (lambda m, a: m.linalg.diagonal(a, offset=1), (B3,)),
    "vecdot": (lambda m, a, b: m.linalg.vecdot(a, b, dim=1), (B3, B3[::-1])),
    "matmul": (lambda m, a, b: m.linalg.matmul(a, b), (M, B3[0, :, :])),
    "fft": (lambda m, a: m.fft.fft(a), (V,)),
    "ifft-n-norm": (lambda m, a: m.fft.ifft(a, 5, norm="ortho"), (V,)),
    "rfft": (lambda m, a: m.fft.rfft(a, dim=1), (B3,)),
    "irfft": (lambda m, a: m.fft.irfft(m.fft.rfft(a), 8), (V,)),
    "fft2": (lambda m, a: m.fft.fft2(a), (B3,)),
    "ifft2-s": (lambda m, a: m.fft.ifft2(a, s=(2, 2), norm="forward"), (B3,)),
    "rfft2": (lambda m, a: m.fft.rfft2(a), (B3,)),
    "fftn": (lambda m, a: m.fft.fftn(a, dim=(0, 2)), (B3,)),
    "rfftn": (lambda m, a: m.fft.rfftn(a), (B3,)),
    "hfft": (lambda m, a: m.fft.hfft(a), (V,)),
    "fftshift": (lambda m, a: m.fft.fftshift(a), (B3,)),
    "ifftshift-dim": (lambda m, a: m.fft.ifftshift(a, dim=1), (B3,)),
    "erf": (lambda m, a: m.special.erf(a), (V,)),
    "expit": (lambda m, a: m.special.expit(a), (V,)),
    "logit": (lambda m, a: m.special.logit(a), (P[:3],)),
    "logit-eps": (lambda m, a: m.special.logit(a, eps=0.2), (P,)),
    "xlogy": (lambda m, a, b: m.special.xlogy(a, b), (P, P[::-1] + 0.5)),
    "log_softmax": (lambda m, a: m.special.log_softmax(a, 1), (B3,)),
    "softmax": (lambda m, a: m.special.softmax(a, 0), (B3,)),
    "logsumexp": (lambda m, a: m.special.logsumexp(a, (0, 2), keepdim=True), (B3,)),
    "expm1": (lambda m, a: m.special.expm1(a), (V,)),
    "exp2": (lambda m, a: m.special.exp2(a), (V,)),
    "log1p": (lambda m, a: m.special.log1p(a), (P,)),
    "round": (lambda m, a: m.special.round(a, decimals=1), (V,)),
    "sinc": (lambda m, a: m.special.sinc(a), (np.concatenate([V, [0.0]]),)),
}


@pytest.mark.torch
@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_against_torch(name, dt):
    torch = pytest.importorskip("torch")
    call, arrays = CASES[name]
    got = call(dj, *[dj.tensor(a.astype(dt)) for a in arrays])
    want = call(torch, *[torch.tensor(a.astype(dt)) for a in arrays])
    assert got.dtype.name == str(want.dtype).split(".")[1], name
    assert tuple(got.shape) == tuple(want.shape)
    tol = 2e-4 if dt == "float32" else 1e-9
    np.testing.assert_allclose(got.numpy(), want.resolve_conj().numpy(), rtol=tol, atol=tol)


def test_against_numpy():
    t = dj.tensor
    np.testing.assert_allclose(dj.linalg.norm(t(B3)).item(), np.linalg.norm(B3.ravel()), rtol=1e-12)
    np.testing.assert_allclose(dj.linalg.matrix_norm(t(B3), 2).numpy(), np.linalg.norm(B3, 2, axis=(-2, -1)),
                               rtol=1e-12)
    np.testing.assert_allclose(dj.linalg.inv(t(M)).numpy(), np.linalg.inv(M), rtol=1e-10)
    np.testing.assert_allclose(dj.linalg.cholesky(t(SPD)).numpy(), np.linalg.cholesky(SPD), rtol=1e-12)
    np.testing.assert_allclose(dj.fft.rfft(t(V)).numpy(), np.fft.rfft(V), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dj.fft.fft2(t(B3)).numpy(), np.fft.fft2(B3), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dj.fft.fftfreq(5, 0.1).numpy(), np.fft.fftfreq(5, 0.1), rtol=1e-6)
    assert dj.fft.rfftfreq(4, dtype=dj.float64).tolist() == [0.0, 0.25, 0.5]
    np.testing.assert_allclose(dj.special.logit(t(P[:3])).numpy(), np.log(P[:3] / (1 - P[:3])), rtol=1e-12)
    assert dj.special.sinc(t([0.0, 1.0])).tolist()[0] == 1.0


def test_fft_promotes_integer_and_bool_input_to_the_default_float():
    # torch.fft transforms integer and bool input in the default float dtype (complex64 results)
    x = dj.tensor([1, 0, 2, 3])
    got = dj.fft.fft(x)
    assert got.dtype == dj.complex64
    np.testing.assert_allclose(got.numpy(), np.fft.fft([1.0, 0.0, 2.0, 3.0]), rtol=1e-6, atol=1e-6)
    assert dj.fft.irfft(x).dtype == dj.float32
    m = dj.tensor([[True, False], [True, True]])
    np.testing.assert_allclose(dj.fft.rfft2(m).numpy(), np.fft.rfft2(np.array([[1.0, 0.0], [1.0, 1.0]])),
                               rtol=1e-6, atol=1e-6)
    old = dj.get_default_dtype()
    dj.set_default_dtype(dj.float64)
    try:
        assert dj.fft.ihfft(x).dtype == dj.complex128
    finally:
        dj.set_default_dtype(old)


def test_pinv_hermitian_reads_the_lower_triangle():
    # torch.linalg.pinv(hermitian=True) reads only the lower triangle (and a real diagonal), as LAPACK's
    # Hermitian routines: a matrix outside the contract gives torch's answer, not the full matrix's
    a = np.array([[2.0, 100.0], [1.0, 3.0]])
    sym = np.array([[2.0, 1.0], [1.0, 3.0]])
    np.testing.assert_allclose(dj.linalg.pinv(dj.tensor(a), hermitian=True).numpy(), np.linalg.pinv(sym),
                               rtol=1e-12)
    c = np.array([[2.0 + 5j, 7.0 - 1j], [1.0 + 2j, 3.0]])
    herm = np.array([[2.0, 1.0 - 2j], [1.0 + 2j, 3.0]])
    np.testing.assert_allclose(dj.linalg.pinv(dj.tensor(c), hermitian=True).numpy(), np.linalg.pinv(herm),
                               rtol=1e-12, atol=1e-14)


@pytest.mark.torch
def test_freq_against_torch():
    torch = pytest.importorskip("torch")
    for n, d in ((5, 0.1), (8, 1.0), (7, 3.0)):
        for f in ("fftfreq", "rfftfreq"):
            got = getattr(dj.fft, f)(n, d)
            want = getattr(torch.fft, f)(n, d)
            assert got.dtype == dj.float32
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-7)


def test_importable_and_listed():
    import dispatch_jit.fft as f
    import dispatch_jit.linalg as la
    import dispatch_jit.special as sp
    assert (la, f, sp) == (dj.linalg, dj.fft, dj.special)
    assert {"linalg", "fft", "special"} <= set(dj.__all__)
    for ns in (dj.linalg, dj.fft, dj.special):
        for name in ns.__all__:
            assert callable(getattr(ns, name)) and getattr(ns, name).__doc__, name
    r = dj.linalg.eigh(dj.tensor(SPD))
    assert [tuple(x.shape) for x in r] == [(3,), (3, 3)]


@pytest.mark.torch
def test_names_exist_in_torch():
    torch = pytest.importorskip("torch")
    for ns in ("linalg", "fft", "special"):
        missing = [n for n in getattr(dj, ns).__all__ if not hasattr(getattr(torch, ns), n)]
        assert not missing, (ns, missing)


def test_solve_left_false_is_x_times_a():
    # the op itself (kernels/lapack) solves X A = B for left=False, matrix and vector B
    a, b = dj.tensor(M), dj.tensor(B3[0, :, :3])
    for x in (dj.linalg.solve(a, b, left=False), dj.ops.aten.linalg_solve(a, b, left=False)):
        np.testing.assert_allclose((x @ a).numpy(), b.numpy(), rtol=1e-10, atol=1e-10)
    v = dj.tensor(V[:3])
    np.testing.assert_allclose((dj.linalg.solve(a, v, left=False) @ a).numpy(), V[:3], rtol=1e-10, atol=1e-10)


def test_errors():
    with pytest.raises(SchemaError, match="out= is not supported"):
        dj.linalg.inv(dj.eye(2), out=dj.eye(2))
    with pytest.raises(InvalidArgumentError, match="unrecognized mode 'x'"):
        dj.linalg.qr(dj.eye(2), mode="x")
    with pytest.raises(InvalidArgumentError, match="atol= is not supported"):
        dj.linalg.pinv(dj.eye(2), atol=0.1)
    with pytest.raises(ShapeError, match="must be 1D or 2D"):
        dj.linalg.norm(dj.ones(2, 2, 2), ord=2)
    with pytest.raises(ShapeError, match="dim must be a 2-tuple"):
        dj.linalg.matrix_norm(dj.ones(2, 2), dim=(0,))
    with pytest.raises(InvalidArgumentError, match="driver"):
        dj.linalg.svd(dj.eye(2), driver="gesvd")
