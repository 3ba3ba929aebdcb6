"""gather, scatter, scatter_add (kernels/indexing) against NumPy oracles over dtype x dim, against
PyTorch where it is installed, and their gradients (each other's adjoints)."""

from __future__ import annotations

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import DTypeError, NoKernelError, OutOfBoundsError, ShapeError

DTYPES = ["float32", "float64", "float16", "int8", "uint8", "int32", "int64", "bool"]
RNG = np.random.default_rng(0)
X = RNG.integers(-5, 6, (3, 4)).astype(np.float64)
IDX = {0: np.array([[2, 0, 1, 2], [0, 0, 2, 1]]), 1: np.array([[3, 0], [1, 1], [2, 0]])}


def _np_gather(a, dim, idx):
    return np.take_along_axis(a, idx, dim)


def _np_scatter(a, dim, idx, src, add):
    out = a.astype(np.float64 if add and a.dtype.kind in "fb" else a.dtype).copy()
    for p in np.ndindex(idx.shape):
        q = list(p)
        q[dim] = idx[p]
        if add:
            out[tuple(q)] += src[p]
        else:
            out[tuple(q)] = src[p]
    return (out != 0) if a.dtype == np.bool_ else out.astype(a.dtype)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather_scatter_oracle(dt, dim):
    a = X.astype(dt)
    idx = IDX[dim % 2]
    got = dj.gather(dj.tensor(a), dim, dj.tensor(idx))
    np.testing.assert_array_equal(got.numpy(), _np_gather(a, dim % 2, idx))
    assert got.dtype.name == dt
    src = (np.arange(idx.size).reshape(idx.shape) % 3).astype(dt)
    uniq = {0: np.array([[2, 0, 1, 0]]), 1: np.array([[3, 0], [1, 2], [0, 2]])}[dim % 2]
    s = dj.scatter(dj.tensor(a), dim, dj.tensor(uniq), dj.tensor(src))
    np.testing.assert_array_equal(s.numpy(), _np_scatter(a, dim % 2, uniq, src, False))
    sa = dj.scatter_add(dj.tensor(a), dim, dj.tensor(idx), dj.tensor(src))
    np.testing.assert_array_equal(sa.numpy(), _np_scatter(a, dim % 2, idx, src, True))


def test_scatter_value_and_methods():
    x = dj.zeros(2, 3)
    np.testing.assert_array_equal(dj.scatter(x, 1, dj.tensor([[2], [0]]), 1.5).numpy(), [[0, 0, 1.5], [1.5, 0, 0]])
    np.testing.assert_array_equal(x.gather(1, dj.tensor([[1, 1]]))[0].numpy(), [0, 0])
    # index larger than src/self outside dim is refused; a strided (transposed) input is read through its strides
    t = dj.tensor(X).t()
    np.testing.assert_array_equal(t.gather(0, dj.tensor([[1, 0, 2]])).numpy(), _np_gather(X.T, 0, np.array([[1, 0, 2]])))


def test_errors_name_the_problem():
    x = dj.tensor(X)
    with pytest.raises(DTypeError, match="integer tensor"):
        dj.gather(x, 0, dj.tensor([[0.0]]))
    with pytest.raises(ShapeError, match="as many dimensions"):
        dj.gather(x, 0, dj.tensor([0]))
    with pytest.raises(ShapeError, match="larger than the input"):
        dj.gather(x, 0, dj.zeros(1, 9, dtype=dj.int64))
    with pytest.raises(OutOfBoundsError, match="index 7 is out of bounds"):
        dj.gather(x, 1, dj.tensor([[7]]))
    with pytest.raises(OutOfBoundsError, match="index -4 is out of bounds"):
        dj.scatter_add(x, 0, dj.tensor([[-4]]), dj.ones(1, 1, dtype=dj.float64))
    with pytest.raises(DTypeError, match="src to have the input's dtype"):
        dj.scatter(x, 0, dj.tensor([[0]]), dj.ones(1, 1))
    with pytest.raises(OutOfBoundsError, match="index 7 is out of bounds"):
        dj.gather(x.cuda(), 1, dj.tensor([[7]]).cuda())
    with pytest.raises(NoKernelError):
        dj.topk(x.cuda(), 1)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_negative_indices_are_refused_as_pytorchs(device):
    # PyTorch's gather, scatter, scatter_add and index_select raise on a negative index; counting it
    # from the end instead (as this library did) answered where PyTorch refuses
    x = dj.tensor(X).to(device)
    i = dj.tensor([[-1], [0], [0]]).to(device)
    for call in (lambda: dj.gather(x, 1, i), lambda: dj.scatter(x, 1, i, 2.0),
                 lambda: dj.scatter_add(x, 1, i, dj.ones(3, 1, dtype=dj.float64).to(device))):
        with pytest.raises(OutOfBoundsError, match="index -1 is out of bounds.*negative indices are refused"):
            call()
    if device == "cpu":
        with pytest.raises(OutOfBoundsError, match="index -1 is out of bounds.*negative indices are refused"):
            dj.index_select(x, 0, dj.tensor([-1]))
        # take and take_along_dim along a dim count from the end, as PyTorch's
        np.testing.assert_array_equal(dj.take(x, dj.tensor([-1])).numpy(), X.reshape(-1)[[-1]])
        np.testing.assert_array_equal(dj.take_along_dim(x, dj.tensor([[-1]] * 3), 1).numpy(), X[:, [-1]])
        with pytest.raises(OutOfBoundsError, match="index -1"):
            dj.take_along_dim(x, dj.tensor([-1]))


@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "int8", "int64", "bool"])
def test_cuda_kernels_match_the_cpu_ones(dt):
    # under the simulator where there is no GPU (tests/conftest.py); a strided (transposed) input
    a = X.astype(dt)
    idx, src = dj.tensor(IDX[0]), dj.tensor(a[:2])
    for cpu, dev in ((dj.gather(dj.tensor(a), 0, idx), dj.gather(dj.tensor(a).cuda(), 0, idx.cuda())),
                     (dj.scatter_add(dj.tensor(a), 0, idx, src), dj.scatter_add(dj.tensor(a).cuda(), 0, idx.cuda(),
                                                                               src.cuda())),
                     (dj.scatter(dj.tensor(a).t(), 1, dj.tensor([[2], [0], [1], [0]]), 1),
                      dj.scatter(dj.tensor(a).t().cuda(), 1, dj.tensor([[2], [0], [1], [0]]).cuda(), 1))):
        assert dev.is_cuda and dev.dtype is cpu.dtype
        np.testing.assert_array_equal(dev.cpu().numpy(), cpu.numpy())


def test_cuda_gradient():
    x = dj.tensor(X).cuda().requires_grad_(True)
    dj.gather(x, 0, dj.tensor(IDX[0]).cuda()).sum().backward()
    assert x.grad.is_cuda
    np.testing.assert_array_equal(x.grad.cpu().numpy(), _np_scatter(np.zeros_like(X), 0, IDX[0],
                                                                     np.ones(IDX[0].shape), True))


def test_gradients_are_adjoints():
    x = dj.tensor(X, requires_grad=True)
    idx = dj.tensor(IDX[0])
    dj.gather(x, 0, idx).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), _np_scatter(np.zeros_like(X), 0, IDX[0], np.ones(IDX[0].shape), True))
    src = dj.ones(2, 4, dtype=dj.float64, requires_grad=True)
    base = dj.tensor(X, requires_grad=True)
    (dj.scatter_add(base, 0, idx, src) * dj.tensor(X)).sum().backward()
    np.testing.assert_array_equal(base.grad.numpy(), X)
    np.testing.assert_array_equal(src.grad.numpy(), _np_gather(X, 0, IDX[0]))
    base.grad = src.grad = None
    uniq = dj.tensor([[2, 0, 1, 0]])
    src1 = dj.ones(1, 4, dtype=dj.float64, requires_grad=True)
    (dj.scatter(base, 0, uniq, src1) * dj.tensor(X)).sum().backward()
    want = X.copy()
    want[[2, 0, 1, 0], [0, 1, 2, 3]] = 0
    np.testing.assert_array_equal(base.grad.numpy(), want)
    np.testing.assert_array_equal(src1.grad.numpy(), X[[2, 0, 1, 0], [0, 1, 2, 3]][None])


def test_gradcheck():
    x = dj.tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    idx = dj.tensor(IDX[1])
    assert dj.autograd.gradcheck(lambda t: dj.gather(t, 1, idx), (x,))
    s = dj.tensor(RNG.standard_normal((3, 2)), requires_grad=True)
    assert dj.autograd.gradcheck(lambda t, u: dj.scatter_add(t, 1, idx, u), (x, s))


@pytest.mark.torch
def test_against_torch():
    torch = pytest.importorskip("torch")
    for dim in (0, 1):
        idx = IDX[dim]
        src = RNG.standard_normal(idx.shape)
        got = dj.scatter_add(dj.tensor(X), dim, dj.tensor(idx), dj.tensor(src)).numpy()
        want = torch.scatter_add(torch.tensor(X), dim, torch.tensor(idx) % X.shape[dim], torch.tensor(src)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12)
        np.testing.assert_array_equal(dj.gather(dj.tensor(X), dim, dj.tensor(idx)).numpy(),
                                      torch.gather(torch.tensor(X), dim, torch.tensor(idx) % X.shape[dim]).numpy())


@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "int8", "uint8", "int64", "bool"])
@pytest.mark.parametrize("k", [0, 1, 3, 70])
def test_topk_against_a_stable_sort(dt, k):
    # the one-pass selection (k <= 64) and the sort (k > 64) agree with NumPy's stable sort:
    # values and indices, NaN largest, ties in index order
    a = RNG.integers(-3, 4, (5, 80)).astype(np.float64)
    a[1, ::7] = np.nan
    a = a.astype(dt) if np.dtype(dt).kind == "f" else np.nan_to_num(a).astype(dt)
    for largest in (True, False):
        for axis in (1, 0):
            n = a.shape[axis]
            kk = min(k, n)
            key = np.where(np.isnan(a.astype(np.float64)), 100.0, a.astype(np.float64))   # NaN: the largest
            order = np.argsort(-key if largest else key, axis=axis, kind="stable")
            want_idx = np.take(order, np.arange(kk), axis)
            got = dj.topk(dj.tensor(a), kk, axis, largest=largest)
            np.testing.assert_array_equal(got.indices.numpy(), want_idx)
            np.testing.assert_array_equal(got.values.numpy(), np.take_along_axis(a, got.indices.numpy(), axis))
            assert got.values.dtype.name == dt and got.indices.dtype is dj.int64


@pytest.mark.torch
@pytest.mark.parametrize("k", [2, 70])
def test_topk_nan_and_ties_match_torch(k):
    torch = pytest.importorskip("torch")
    a = RNG.integers(-3, 4, (4, 90)).astype(np.float32)
    a[0, [5, 50]] = np.nan
    for largest in (True, False):
        got = dj.topk(dj.tensor(a), k, largest=largest)
        want = torch.topk(torch.tensor(a), k, largest=largest)
        np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())


def test_topk_errors_and_zero_d():
    with pytest.raises(ShapeError, match="out of range"):
        dj.topk(dj.tensor([1.0, 2.0]), 3)
    with pytest.raises(DTypeError, match="complex"):
        dj.topk(dj.tensor([1j]), 1)
    r = dj.topk(dj.tensor(5.0), 1)
    assert r.values.item() == 5.0 and r.indices.item() == 0 and r.values.ndim == 0


@pytest.mark.parametrize("dim", [0, 1, 2])
@pytest.mark.parametrize("add", [True, False])
def test_scatter_of_whole_rows_takes_the_row_loop_with_the_general_loops_bits(dim, add):
    # an index that is one vector broadcast over the other dims (index_select's and embedding's
    # backward) is scattered row by row; each element must take its writes (or sum its terms) in
    # the order the general loop does, so float32 sums round alike
    from dispatch_jit.kernels.indexing import cpu
    rng = np.random.default_rng(dim)
    shape = [3, 4, 5]
    n = shape[dim]
    rows = rng.integers(0, n, 7)                      # repeated rows: order matters
    src_shape = list(shape)
    src_shape[dim] = rows.size
    src = (rng.standard_normal(src_shape) * 10.0 ** rng.integers(-4, 5, src_shape)).astype(np.float32)
    along = [1, 1, 1]
    along[dim] = -1
    idx = dj.tensor(rows).reshape(along).expand(*src_shape)
    assert 0 in idx.stride()
    x = dj.zeros(*shape)
    op = dj.scatter_add if add else dj.scatter
    before = len(cpu.compiled_signatures().get("scatter_add_rows" if add else "scatter_rows", []))
    got = op(x, dim, idx, dj.tensor(src))
    assert len(cpu.compiled_signatures().get("scatter_add_rows" if add else "scatter_rows", [])) >= max(before, 1)
    want = op(x, dim, idx.contiguous(), dj.tensor(src))    # the general loop
    np.testing.assert_array_equal(got.numpy().view(np.int32), want.numpy().view(np.int32))
    bad = rows.copy()
    bad[4] = n
    with pytest.raises(OutOfBoundsError, match=f"index {n} is out of bounds for dimension of size {n}"):
        op(x, dim, dj.tensor(bad).reshape(along).expand(*src_shape), dj.tensor(src))


def test_a_compiled_loop_is_found_without_making_its_numba_signature(monkeypatch):
    """The per-call path reads the compiled loops by (name, dtypes): Numba's array types (~15 us a
    call, more than the GPT's embedding scatter itself) are made only on a miss."""
    from dispatch_jit.kernels.indexing import cpu
    a = np.arange(12.0).reshape(3, 4)
    rows = np.broadcast_to(np.array([2, 0]).reshape(2, 1), (2, 4))     # whole rows: the rows loop
    idx = np.array([[2, 0, 1, 2], [0, 0, 2, 1]])

    def calls():
        out = np.zeros((3, 4))
        cpu.scatter(out, rows, np.ones((2, 4)), 0, True)
        cpu.scatter(out, idx, np.ones((2, 4)), 0, True)
        return out, cpu.gather(a, idx, 0)[0]

    first = calls()

    def refuse(*args, **kwargs):
        raise AssertionError("a Numba signature was made on a cache hit")
    monkeypatch.setattr(cpu, "_array", refuse)
    again = calls()
    for x, y in zip(first, again):
        np.testing.assert_array_equal(x, y)
