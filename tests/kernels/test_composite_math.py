"""diag, diagonal, addmm, addmv, baddbmm, xlogy, cross, median, unique (kernels/composite_math.py,
kernels/unique.py): one table of calls run in dispatch_jit and in PyTorch 2.13 where installed, NumPy
oracles always, gradients against PyTorch's, and the errors."""

from __future__ import annotations

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import BroadcastError, DTypeError, ShapeError

RNG = np.random.default_rng(3)
A = np.round(RNG.standard_normal((3, 4)) * 4, 1)
S = np.round(RNG.standard_normal((3, 3)) * 4, 1)
B = np.round(RNG.standard_normal((4, 2)) * 4, 1)
V = np.array([1.0, -2.0, 0.5])
P = np.array([0.0, 2.0, 0.5, 0.0])
FLOATS = ["float32", "float64"]
ALL = FLOATS + ["int32", "int64"]

CASES = {
    "diag-1d": (lambda m, a: m.diag(a), (V,), ALL),
    "diag-1d-k2": (lambda m, a: m.diag(a, 2), (V,), ALL),
    "diag-1d-k-1": (lambda m, a: m.diag(a, -1), (V,), FLOATS),
    "diag-2d": (lambda m, a: a.diag(), (A,), ALL),
    "diag-2d-k-2": (lambda m, a: m.diag(a, -2), (A,), FLOATS),
    "diagonal": (lambda m, a: m.diagonal(a, 1), (A,), ALL),
    "diagonal-3d": (lambda m, a: a.diagonal(-1, 2, 0), (np.stack([A, -A]).transpose(2, 0, 1),), FLOATS),
    "diagonal-off": (lambda m, a: m.diagonal(a, 5), (A,), FLOATS),
    "addmm": (lambda m, x, a, b: m.addmm(x, a, b), (B[0], A, B), ALL),
    "addmm-ab": (lambda m, x, a, b: m.addmm(x, a, b, beta=0.5, alpha=-2), (np.ones((3, 2)), A, B), FLOATS),
    "addmv": (lambda m, x, a, b: x.addmv(a, b, alpha=3), (V, A, B[:, 0]), ALL),
    "baddbmm": (lambda m, x, a, b: m.baddbmm(x, a, b, beta=2), (V[:1], np.stack([A, A]), np.stack([B, -B])),
                FLOATS),
    "xlogy": (lambda m, x, y: m.xlogy(x, y), (P, np.array([0.0, 3.0, 0.25, 7.0])), FLOATS),
    "xlogy-int": (lambda m, x, y: x.xlogy(y), (np.array([0, 1, 2]), np.array([0, 5, 2])), ["int64"]),
    "cross": (lambda m, a, b: m.cross(a, b, dim=1), (S, S[::-1] + 1), ALL),
    "cross-dim0": (lambda m, a, b: a.cross(b, dim=0), (S.T[:, :2], V[:, None]), FLOATS),
    "median": (lambda m, a: m.median(a), (A,), ALL),
    "median-even": (lambda m, a: a.median(), (A[:2],), FLOATS),
    "median-dim": (lambda m, a: m.median(a, 1).values, (A,), ALL),
    "median-dim-idx": (lambda m, a: m.median(a, 0, keepdim=True).indices, (A,), FLOATS),
    "median-nan": (lambda m, a: m.median(a, 1).indices, (np.array([[1.0, np.nan, np.nan], [3.0, 1.0, 2.0]]),),
                   FLOATS),
    "unique": (lambda m, a: m.unique(a), (np.array([3.0, 1.0, 3.0, -2.0, 1.0]),), ALL),
    "unique-all": (lambda m, a: m.unique(a, return_inverse=True, return_counts=True)[1:],
                   (np.array([[3.0, 1.0], [3.0, np.nan], [np.nan, 1.0]]),), FLOATS),
    "unique-dim": (lambda m, a: a.unique(dim=0, return_inverse=True, return_counts=True),
                   (np.array([[1, 2], [0, 5], [1, 2]]),), ALL),
}
PARAMS = [(name, dt) for name, (_, _, dts) in CASES.items() for dt in dts]


def _flat(x):
    return list(x) if isinstance(x, tuple) else [x]


@pytest.mark.torch
@pytest.mark.parametrize("name,dt", PARAMS)
def test_against_torch(name, dt):
    torch = pytest.importorskip("torch")
    call, arrays, _ = CASES[name]
    got = _flat(call(dj, *[dj.tensor(a.astype(dt)) for a in arrays]))
    want = _flat(call(torch, *[torch.tensor(a.astype(dt)) for a in arrays]))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype.name == str(w.dtype).split(".")[1], name
        assert tuple(g.shape) == tuple(w.shape)
        tol = 1e-6 if dt == "float32" else 1e-13
        np.testing.assert_allclose(g.numpy().astype(np.float64), w.numpy().astype(np.float64), rtol=tol, atol=tol)


ORACLE = {
    "diag-1d": lambda a: np.diag(a), "diag-1d-k2": lambda a: np.diag(a, 2), "diag-2d-k-2": lambda a: np.diag(a, -2),
    "diagonal-3d": lambda a: np.diagonal(a, -1, 2, 0), "diagonal-off": lambda a: np.diagonal(a, 5),
    "addmm-ab": lambda x, a, b: 0.5 * x - 2 * (a @ b), "addmv": lambda x, a, b: x + 3 * (a @ b),
    "xlogy": lambda x, y: np.where(x == 0, 0.0, x * np.log(np.where(y > 0, y, 1))),
    "cross": lambda a, b: np.cross(a, b, axis=1), "median": lambda a: np.sort(a.ravel())[(a.size - 1) // 2],
    "median-dim": lambda a: np.sort(a, 1)[:, (a.shape[1] - 1) // 2], "unique": lambda a: np.unique(a),
}


@pytest.mark.parametrize("name", sorted(ORACLE))
def test_against_numpy(name):
    call, arrays, _ = CASES[name]
    got = call(dj, *[dj.tensor(a) for a in arrays])
    np.testing.assert_allclose(got.numpy(), ORACLE[name](*arrays), rtol=1e-12)


GRAD = ["diag-1d", "diag-1d-k-1", "diag-2d-k-2", "diagonal", "diagonal-3d", "addmm", "addmm-ab", "addmv",
        "baddbmm", "cross", "cross-dim0", "median", "median-dim"]


@pytest.mark.torch
@pytest.mark.parametrize("name", GRAD)
def test_gradients_against_torch(name):
    torch = pytest.importorskip("torch")
    call, arrays, _ = CASES[name]
    xs = [dj.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    w = RNG.standard_normal(tuple(call(torch, *ts).shape))
    (call(dj, *xs) * dj.tensor(w)).sum().backward()
    (call(torch, *ts) * torch.tensor(w)).sum().backward()
    for x, t in zip(xs, ts):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_xlogy_gradient_and_specials():
    x = dj.tensor([0.0, 2.0, 1.0], requires_grad=True)
    y = dj.tensor([5.0, 3.0, 2.0], requires_grad=True)
    dj.xlogy(x, y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.0, np.log(3.0), np.log(2.0)])
    np.testing.assert_allclose(y.grad.numpy(), [0.0, 2 / 3, 0.5])
    out = dj.xlogy(dj.tensor([0.0, 0.0, 1.0]), dj.tensor([0.0, np.inf, np.nan]))
    assert out.tolist()[:2] == [0.0, 0.0] and np.isnan(out.tolist()[2])
    assert dj.xlogy(dj.tensor([2.0]), 1.0).tolist() == [0.0]


def test_diagonal_result_refuses_writes():
    x = dj.tensor([[1.0, 2.0], [3.0, 4.0]])
    d = x.diagonal()
    with pytest.raises((ValueError, RuntimeError)):
        d[0] = 9.0
    assert x.tolist() == [[1.0, 2.0], [3.0, 4.0]]


def test_unique_is_not_differentiable_and_keeps_dtype():
    x = dj.tensor([2.0, 1.0, 2.0], requires_grad=True)
    u = dj.unique(x)
    assert u.tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match="_unique2"):      # as PyTorch: no derivative
        u.sum().backward()
    assert dj.unique(dj.tensor([True, False, True])).tolist() == [False, True]
    inv = dj.unique(dj.tensor([[3, 1], [1, 3]]), return_inverse=True)[1]
    assert inv.dtype == dj.int64 and inv.tolist() == [[1, 0], [0, 1]]


def test_errors():
    with pytest.raises(ShapeError, match="Supports 1D or 2D"):
        dj.diag(dj.zeros(2, 2, 2))
    with pytest.raises(ShapeError, match="cannot be identical"):
        dj.diagonal(dj.zeros(2, 2), 0, 1, 1)
    with pytest.raises(ShapeError, match="mat1 and mat2 shapes cannot be multiplied"):
        dj.addmm(dj.zeros(2), dj.zeros(2, 3), dj.zeros(2, 3))
    with pytest.raises(BroadcastError, match="does not broadcast"):
        dj.addmm(dj.zeros(5), dj.zeros(2, 3), dj.zeros(3, 2))
    with pytest.raises(DTypeError, match="same dtype"):
        dj.addmm(dj.zeros(2, dtype=dj.float64), dj.zeros(2, 3), dj.zeros(3, 2))
    with pytest.raises(ShapeError, match="size mismatch"):
        dj.addmv(dj.zeros(2), dj.zeros(2, 3), dj.zeros(2))
    with pytest.raises(ShapeError, match="must have length 3"):
        dj.cross(dj.zeros(2, 3), dj.zeros(2, 3), dim=0)
    with pytest.warns(UserWarning, match="without specifying the dim"):
        assert dj.cross(dj.eye(3), dj.eye(3)).tolist() == [[0.0] * 3] * 3
    with pytest.raises(ShapeError, match="non-zero size"):
        dj.median(dj.zeros(2, 0), 1)
    with pytest.raises(DTypeError, match="not implemented for 'complex64'"):
        dj.unique(dj.zeros(2, dtype=dj.complex64))
    assert np.isnan(dj.median(dj.zeros(0)).item())


def test_unique_of_a_zero_dim_tensor_has_a_zero_dim_inverse():
    out, inverse, counts = dj.unique(dj.tensor(3), return_inverse=True, return_counts=True)
    assert out.tolist() == [3] and inverse.shape == () and inverse.item() == 0 and counts.tolist() == [1]
