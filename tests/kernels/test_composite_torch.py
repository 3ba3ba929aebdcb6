"""PyTorch's convenience ops (kernels/composite_torch.py, kernels/torch_functions.py): one table of
calls run in dispatch_jit and, where it is installed, in PyTorch 2.13 (NumPy oracles otherwise),
over dtypes; their gradients against PyTorch's; the errors they raise."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import BroadcastError, DTypeError, SchemaError, ShapeError

RNG = np.random.default_rng(1)
A = np.round(RNG.standard_normal((3, 4)) * 4, 1)
A[0, 1] = A[2, 3]          # ties for sort/topk
B = np.round(RNG.standard_normal((4, 2)) * 4, 1)
V = np.array([1.0, -2.0, 0.5])
FLOATS = ["float32", "float64"]
ALL = FLOATS + ["int32", "int64"]

# name -> (call on a module m (dj or torch), its arguments as arrays, dtypes)
CASES = {
    "mm": (lambda m, a, b: m.mm(a, b), (A, B), ALL),
    "bmm": (lambda m, a, b: m.bmm(a, b), (np.stack([A, -A]), np.stack([B, B])), ALL),
    "outer": (lambda m, a, b: m.outer(a, b), (V, A[0]), ALL),
    "t": (lambda m, a: a.t(), (A,), ALL),
    "t-1d": (lambda m, a: m.t(a), (V,), ALL),
    "mT": (lambda m, a: a.mT, (np.stack([A, A]),), ALL),
    "clamp_min": (lambda m, a: m.clamp_min(a, 0.5), (A,), FLOATS),
    "clamp_max-tensor": (lambda m, a, b: a.clamp_max(b), (A, A[0]), ALL),
    "isclose": (lambda m, a, b: m.isclose(a, b, rtol=0.1, atol=0.5), (A, A + V[:1]), FLOATS),
    "isclose-int": (lambda m, a, b: m.isclose(a, b), (A, A), ["int32", "int64"]),
    "masked_fill": (lambda m, a: a.masked_fill(a > 0, -1.5), (A,), FLOATS),
    "masked_fill-int": (lambda m, a: m.masked_fill(a, a > 0, 7), (A,), ["int32", "int64"]),
    "topk": (lambda m, a: m.topk(a, 2).values, (A,), ALL),
    "topk-smallest-dim0": (lambda m, a: a.topk(2, 0, largest=False).values, (A,), ALL),
    "repeat": (lambda m, a: a.repeat(2, 1, 3), (A,), ALL),
    "repeat-0d": (lambda m, a: a.repeat(2), (np.array(3.0),), ALL),
    "sort-desc": (lambda m, a: m.sort(a, descending=True, stable=True).values, (A,), ALL),
    "cumsum": (lambda m, a: m.cumsum(a, dim=1), (A,), ALL),
    "cumprod": (lambda m, a: a.cumprod(0), (A,), FLOATS),
    "norm": (lambda m, a: m.norm(a), (A,), FLOATS),
    "norm-1-dim": (lambda m, a: a.norm(1, dim=1, keepdim=True), (A,), FLOATS),
    "norm-inf": (lambda m, a: a.norm(float("inf"), dim=0), (A,), FLOATS),
    "norm-3": (lambda m, a: m.norm(a, 3, dim=(0, 1)), (A,), FLOATS),
    "norm-nuc": (lambda m, a: m.norm(a, "nuc"), (A,), FLOATS),
    "norm-nuc-batch": (lambda m, a: m.norm(m.stack([a, a * 2]), "nuc", dim=(2, 0), keepdim=True), (A,), FLOATS),
    "einsum-matmul": (lambda m, a, b: m.einsum("ij,jk->ik", a, b), (A, B), FLOATS),
    "einsum-batched": (lambda m, a, b: m.einsum("bij,bjk->bik", a, b), (np.stack([A, A]), np.stack([B, -B])),
                       FLOATS),
    "einsum-transpose": (lambda m, a: m.einsum("ij->ji", a), (A,), FLOATS),
    "einsum-trace": (lambda m, a: m.einsum("ii", a), (A[:, :3],), FLOATS),
    "einsum-diag": (lambda m, a: m.einsum("ii->i", a), (A[:, :3],), FLOATS),
    "einsum-outer": (lambda m, a, b: m.einsum("i,j->ij", a, b), (V, B[:, 0]), FLOATS),
    "einsum-sum": (lambda m, a: m.einsum("ij->", a), (A,), FLOATS),
    "einsum-implicit": (lambda m, a, b: m.einsum("ij,jk", a, b), (A, B), FLOATS),
    "einsum-ellipsis": (lambda m, a, b: m.einsum("...ij,...jk->...ik", a, b),
                        (np.stack([A, A]), np.stack([B, B])), FLOATS),
    "einsum-three": (lambda m, a, b, c: m.einsum("ij,jk,k->i", a, b, c), (A, B, B[:2, 0]), FLOATS),
    "einsum-bilinear": (lambda m, a, b, c: m.einsum("i,ij,j->", a, b, c), (V, A, A[0]), FLOATS),
}
PARAMS = [(name, dt) for name, (_, _, dts) in CASES.items() for dt in dts]


def _np(x):
    return x.numpy() if hasattr(x, "numpy") else np.asarray(x)


@pytest.mark.torch
@pytest.mark.parametrize("name,dt", PARAMS)
def test_against_torch(name, dt):
    torch = pytest.importorskip("torch")
    call, arrays, _ = CASES[name]
    got = call(dj, *[dj.tensor(a.astype(dt)) for a in arrays])
    want = call(torch, *[torch.tensor(a.astype(dt)) for a in arrays])
    assert got.dtype.name == str(want.dtype).split(".")[1], name
    assert tuple(got.shape) == tuple(want.shape)
    tol = 1e-5 if dt == "float32" else 1e-12
    np.testing.assert_allclose(_np(got).astype(np.float64), want.numpy().astype(np.float64), rtol=tol, atol=tol)


# NumPy oracles for the cases above (no torch needed)
ORACLE = {
    "mm": lambda a, b: a @ b, "outer": np.outer, "t": lambda a: a.T, "clamp_min": lambda a: np.maximum(a, 0.5),
    "masked_fill": lambda a: np.where(a > 0, -1.5, a), "repeat": lambda a: np.tile(a, (2, 1, 3)),
    "topk": lambda a: -np.sort(-a, 1)[:, :2], "norm-1-dim": lambda a: np.abs(a).sum(1, keepdims=True),
    "norm-nuc": lambda a: np.linalg.norm(a, "nuc"),
    "norm-nuc-batch": lambda a: np.linalg.norm(np.stack([a, a * 2]).transpose(1, 2, 0), "nuc", axis=(1, 2))[None, :, None],
    "einsum-trace": lambda a: np.trace(a), "einsum-ellipsis": lambda a, b: np.einsum("...ij,...jk->...ik", a, b),
    "einsum-three": lambda a, b, c: np.einsum("ij,jk,k->i", a, b, c),
}


@pytest.mark.parametrize("name", sorted(ORACLE))
def test_against_numpy(name):
    call, arrays, _ = CASES[name]
    got = call(dj, *[dj.tensor(a) for a in arrays])
    np.testing.assert_allclose(_np(got), ORACLE[name](*arrays), rtol=1e-12)


GRAD = ["mm", "bmm", "outer", "t", "clamp_min", "masked_fill", "topk", "topk-smallest-dim0", "repeat", "sort-desc",
        "cumsum", "cumprod", "norm", "norm-1-dim", "norm-3", "einsum-matmul", "einsum-trace", "einsum-diag",
        "einsum-three", "einsum-ellipsis", "einsum-bilinear"]


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


def test_split_chunk_are_views():
    x = dj.arange(10.0).reshape(5, 2)
    parts = x.split(2)
    assert [tuple(p.shape) for p in parts] == [(2, 2), (2, 2), (1, 2)]
    parts[1][0, 0] = 100.0
    assert x[2, 0].item() == 100.0
    assert [tuple(p.shape) for p in dj.chunk(x, 2, dim=1)] == [(5, 1), (5, 1)]
    assert [tuple(p.shape) for p in x.chunk(4)] == [(2, 2), (2, 2), (1, 2)]   # PyTorch: ceil(5/4)=2 -> 3 chunks
    assert [tuple(p.shape) for p in x.split([1, 4])] == [(1, 2), (4, 2)]


@pytest.mark.torch
def test_split_chunk_match_torch():
    torch = pytest.importorskip("torch")
    for n in (0, 1, 5, 6, 7):
        for k in (1, 2, 3, 4):
            got = [tuple(p.shape) for p in dj.zeros(n, 2).chunk(k)]
            want = [tuple(p.shape) for p in torch.zeros(n, 2).chunk(k)]
            assert got == want, (n, k)
            if k <= max(n, 1):
                assert [tuple(p.shape) for p in dj.zeros(n, 2).split(k)] == \
                       [tuple(p.shape) for p in torch.zeros(n, 2).split(k)]


def test_where_one_argument_and_numel_allclose():
    c = dj.tensor([[0, 1], [1, 1]])
    rows, cols = dj.where(c)
    assert rows.tolist() == [0, 1, 1] and cols.tolist() == [1, 0, 1]
    assert [t.tolist() for t in dj.where(dj.tensor([0.0, 2.0, 3.0]))] == [[1, 2]]
    assert dj.where(c > 0, 1.0, 0.0).tolist() == [[0.0, 1.0], [1.0, 1.0]]
    assert dj.numel(dj.zeros(2, 3)) == 6 and dj.zeros(2, 3).numel() == 6
    assert dj.allclose(dj.tensor([1.0, math.nan]), dj.tensor([1.0, math.nan]), equal_nan=True)
    assert not dj.allclose(dj.tensor([1.0, math.nan]), dj.tensor([1.0, math.nan]))
    assert dj.tensor([1.0, 2.0]).allclose(dj.tensor([1.0, 2.0 + 1e-6]))


def test_errors():
    x = dj.tensor(A)
    with pytest.raises(ShapeError, match="mat1 and mat2 shapes cannot be multiplied"):
        dj.mm(x, x)
    with pytest.raises(ShapeError, match="bmm: self must be a 3-D"):
        dj.bmm(x, x)
    with pytest.raises(ShapeError, match="t: expects a tensor with <= 2 dimensions"):
        dj.zeros(2, 2, 2).t()
    with pytest.raises(DTypeError, match="bool mask"):
        x.masked_fill(dj.tensor(A) * 0, 1.0)
    with pytest.raises(BroadcastError, match="does not broadcast"):
        x.masked_fill(dj.tensor([True, False]), 1.0)
    # a complex value with an imaginary part does not fit a real tensor: refused as PyTorch does,
    # not silently dropped; an imaginary part of zero fits, and a bool or complex tensor takes any
    m = dj.tensor([True, False])
    for value in (1j, dj.tensor(2 + 1j)):
        with pytest.raises(OverflowError, match="value cannot be converted to type int64 without overflow"):
            dj.tensor([1, 2]).masked_fill(m, value)
        with pytest.raises(OverflowError, match="float32"):
            dj.tensor([1.0, 2.0]).masked_fill(m, value)
    assert dj.tensor([1, 2]).masked_fill(m, 3 + 0j).tolist() == [3, 2]
    assert dj.tensor([False, False]).masked_fill(m, 1j).tolist() == [True, False]
    assert dj.tensor([1j, 2j]).masked_fill(m, 1j).tolist() == [1j, 2j]
    with pytest.raises(ShapeError, match="out of range"):
        x.topk(5)
    with pytest.raises(ShapeError, match="can not be smaller"):
        x.repeat(2)
    with pytest.raises(ShapeError, match="sum to the size"):
        x.split([1, 1])
    with pytest.raises(DTypeError, match="same dtype"):
        dj.isclose(x, x.float())
    with pytest.raises(SchemaError, match="floating point"):
        dj.norm(dj.tensor([1, 2]))
    with pytest.raises(ShapeError, match="dim must be a 2-tuple"):
        dj.norm(dj.ones(2, 2, 2), "nuc")
    with pytest.raises(SchemaError, match="2 operand"):
        dj.einsum("ij,jk", x)
    with pytest.raises(SchemaError, match="subscripts are letters"):
        dj.einsum("i1->i", dj.tensor(V))
    with pytest.raises(ShapeError, match="name 1 dimensions"):
        dj.einsum("i->i", x)
    with pytest.raises(SchemaError, match="distinct letters"):
        dj.einsum("ij->k", x)
    with pytest.raises(SchemaError, match="condition alone"):
        dj.where(x > 0, 1.0)


def test_einsum_nan_off_diagonal_does_not_leak():
    a = dj.tensor([[1.0, math.nan], [math.nan, 2.0]])
    assert dj.einsum("ii->i", a).tolist() == [1.0, 2.0]


def test_clamp_min_max_methods_and_grad():
    x = dj.tensor([-1.0, 0.5, 2.0], requires_grad=True)
    y = x.clamp_min(0.0).clamp_max(1.0)
    assert y.tolist() == [0.0, 0.5, 1.0]
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 0.0]


@pytest.mark.parametrize("reps", [(3,), (1, 1), (2, 1), (1, 3), (2, 2)])
def test_repeat_is_new_memory(reps):
    """repeat copies, as PyTorch's: a reshape of the broadcast that could view it would alias the
    input (a later write into the input showing through, and the result read-only)."""
    a = dj.tensor([[1.0, 2.0]]) if len(reps) == 2 else dj.tensor(2.0)
    r = a.repeat(*reps)
    before = r.numpy().copy()
    a.add_(10.0)
    np.testing.assert_array_equal(r.numpy(), before)
    r.mul_(2.0)                       # writable
    np.testing.assert_array_equal(r.numpy(), before * 2)
