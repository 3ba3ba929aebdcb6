"""Advanced indexing as dispatcher ops (aten::index, index_put_, index_put: kernels/indexing/
advanced.py), ``t[i]``/``t[i] = v`` decomposed into a view and one of them as PyTorch does, their
derivative rows, and the in-place index methods (index_add_, index_copy_, ...), against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import (
    AutogradError,
    BroadcastError,
    DTypeError,
    OutOfBoundsError,
)
from dispatch_jit.tensor import version_of

X = np.arange(24, dtype=np.float64).reshape(2, 3, 4)


def _indices(m):
    """Python indices for a (2, 3, 4) tensor, built with library ``m`` (dj or torch)."""
    t = m.tensor
    return [
        (0, slice(None), [0, 1]),            # an int beside a list: PyTorch puts the list's dim in place
        ([1, 0], 2),
        (t([1, 0]), slice(None), t([3, -4])),  # separated by a slice: the index dims go first
        (Ellipsis, t([[0, 1], [2, 3]])),
        (None, 1, t([True, False, True])),
        (t(X > 10),),
        (slice(1, None), t([[True, False, True, True]] * 3)),
        (True, 0),
        (False,),
        ([[0, 1], [1, 0]], slice(0, 2)),
        (t(1), t([0, 2])),
        (slice(None), t([], dtype=m.int64)),
    ]


def test_getitem_matches_torch():
    torch = pytest.importorskip("torch")
    x, tx = dj.tensor(X), torch.tensor(X)
    for i, ti in zip(_indices(dj), _indices(torch)):
        got, want = x[i], tx[ti]
        assert tuple(got.shape) == tuple(want.shape), i
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_setitem_matches_torch():
    torch = pytest.importorskip("torch")
    for i, ti in zip(_indices(dj), _indices(torch)):
        x, tx = dj.tensor(X), torch.tensor(X)
        x[i] = -1.0
        tx[ti] = -1.0
        np.testing.assert_array_equal(x.numpy(), tx.numpy())
        shape = tuple(tx[ti].shape)
        v = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) + 100
        x[i] = dj.tensor(v)
        tx[ti] = torch.tensor(v)
        np.testing.assert_array_equal(x.numpy(), tx.numpy())


def test_index_ops_are_dispatcher_ops():
    assert str(dj.ops.aten.index.Tensor.schema) == "aten::index.Tensor(Tensor self, Tensor?[] indices) -> Tensor"
    assert "Tensor(a!) self" in str(dj.ops.aten.index_put_.default.schema)
    x = dj.tensor(X)
    got = dj.ops.aten.index.Tensor(x, [None, dj.tensor([2, 0])])
    np.testing.assert_array_equal(got.numpy(), X[:, [2, 0]])
    y = dj.zeros(3)
    out = y.index_put_((dj.tensor([0, 0, 2]),), dj.tensor([1.0, 2.0, 3.0]), accumulate=True)
    assert out is y
    np.testing.assert_array_equal(y.numpy(), [3.0, 0.0, 3.0])
    z = dj.index_put(dj.zeros(3), (dj.tensor([1]),), dj.tensor(5.0))
    np.testing.assert_array_equal(z.numpy(), [0.0, 5.0, 0.0])


def test_errors_are_pytorchs():
    x = dj.tensor(X)
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 1 with size 3"):
        x[:, [0, 3]]
    with pytest.raises(IndexError, match="index -3 is out of bounds for dimension 0 with size 2"):
        x[[-3]] = 0.0
    with pytest.raises(IndexError, match=r"The shape of the mask \[2\] at index 0 does not match"):
        x[:, dj.tensor([True, False])]
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 3"):
        x[0, 0, [0], 0]
    with pytest.raises(IndexError, match="tensors used as indices must be long, int, byte or bool"):
        x[dj.tensor([0.0])]
    with pytest.raises(DTypeError, match="Index put requires the source and destination dtypes match"):
        dj.zeros(3).index_put_((dj.tensor([0]),), dj.tensor([1], dtype=dj.int64))
    with pytest.raises(BroadcastError, match=r"shape mismatch: value tensor of shape \[3\] cannot be broadcast"):
        dj.zeros(3).index_put_((dj.tensor([0, 1]),), dj.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(OutOfBoundsError):
        dj.ops.aten.index.Tensor(x, [dj.tensor([5])])


def test_gradients_match_torch_and_gradcheck():
    torch = pytest.importorskip("torch")
    idx = [1, 1, 0]
    x = dj.tensor(X, requires_grad=True)
    tx = torch.tensor(X, requires_grad=True)
    w = np.arange(X[:, idx].size, dtype=np.float64).reshape(X[:, idx].shape)
    (x[:, idx] * dj.tensor(w)).sum().backward()
    (tx[:, idx] * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    assert dj.autograd.gradcheck(lambda a: a[dj.tensor(X[0] > 4)], (dj.tensor(X[0], requires_grad=True),))
    assert dj.autograd.gradcheck(lambda a, v: dj.index_put(a, (dj.tensor([0, 2, 0]),), v, accumulate=True),
                                 (dj.tensor(X[0], requires_grad=True), dj.tensor(X[1, :1], requires_grad=True)))
    assert dj.autograd.gradcheck(lambda a, v: dj.index_put(a, (None, dj.tensor([3, 1])), v),
                                 (dj.tensor(X[0], requires_grad=True), dj.tensor(X[1, :, :2], requires_grad=True)))
    # the backward of index is itself differentiable (create_graph): its gradient is index again
    a = dj.tensor(X[0], requires_grad=True)
    (g,) = dj.autograd.grad(a[[0, 0, 2]].pow(2).sum(), a, create_graph=True)
    (gg,) = dj.autograd.grad(g.sum(), a)
    np.testing.assert_array_equal(gg.numpy(), [[4.0] * 4, [0.0] * 4, [2.0] * 4])


def test_setitem_records_index_put_and_bumps_the_version():
    torch = pytest.importorskip("torch")
    v, tv = dj.tensor([2.0, 3.0], requires_grad=True), torch.tensor([2.0, 3.0], dtype=torch.float64, requires_grad=True)
    base, tbase = dj.tensor(X, requires_grad=True), torch.tensor(X, requires_grad=True)
    y, ty = base * 1.0, tbase * 1.0
    view, tview = y[1], ty[1]                 # the write lands in a view: its base is rebased
    before = version_of(view)
    view[dj.tensor([[True, False, False, True]] + [[False] * 4] * 2)] = v
    tview[torch.tensor([[True, False, False, True]] + [[False] * 4] * 2)] = tv
    assert version_of(view) == before + 1
    w = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    (y * dj.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(v.grad.numpy(), tv.grad.numpy())
    np.testing.assert_array_equal(base.grad.numpy(), tbase.grad.numpy())
    with pytest.raises(AutogradError, match="leaf Variable"):
        dj.zeros(3, requires_grad=True)[[0]] = 1.0


_INPLACE = {
    "index_add_": lambda m, x, src: x.index_add_(1, m.tensor([2, 0, 2]), src, alpha=2),
    "index_copy_": lambda m, x, src: x.index_copy_(1, m.tensor([2, 0, 1]), src),
    "index_fill_": lambda m, x, src: x.index_fill_(1, m.tensor([2, 0]), -1.5),
    "index_reduce_": lambda m, x, src: x.index_reduce_(1, m.tensor([2, 0, 2]), src, "amax", include_self=False),
    "scatter_reduce_": lambda m, x, src: x.scatter_reduce_(1, m.tensor([[0, 1, 0]] * 2), src, "sum"),
    "masked_scatter_": lambda m, x, src: x.masked_scatter_(m.tensor([[True, False, True]] * 2), src),
    "put_": lambda m, x, src: x.put_(m.tensor([5, -1, 0]), src[0], accumulate=True),
}


@pytest.mark.parametrize("name", sorted(_INPLACE))
def test_inplace_index_methods_match_torch(name):
    torch = pytest.importorskip("torch")
    call = _INPLACE[name]
    a, s = np.arange(6, dtype=np.float64).reshape(2, 3), np.arange(6, dtype=np.float64).reshape(2, 3) * 10 - 7
    base, src = dj.tensor(a, requires_grad=True), dj.tensor(s, requires_grad=True)
    tbase, tsrc = torch.tensor(a, requires_grad=True), torch.tensor(s, requires_grad=True)
    x, tx = base * 1.0, tbase * 1.0
    before = version_of(x)
    assert call(dj, x, src) is x
    assert version_of(x) > before
    call(torch, tx, tsrc)
    np.testing.assert_array_equal(x.detach().numpy(), tx.detach().numpy())
    w = np.arange(6, dtype=np.float64).reshape(2, 3) + 1
    (x * dj.tensor(w)).sum().backward()
    (tx * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(base.grad.numpy(), tbase.grad.numpy())
    tg = tsrc.grad.numpy() if tsrc.grad is not None else np.zeros_like(s)
    np.testing.assert_allclose(src.grad.numpy() if src.grad is not None else np.zeros_like(s), tg)
    with pytest.raises(AutogradError, match="leaf Variable"):
        call(dj, dj.tensor(a, requires_grad=True), src)


def test_cuda_kernels_match_the_cpu_ones():
    # under the simulator where there is no GPU (tests/conftest.py)
    x = dj.tensor(X)
    xc = x.cuda()
    for i in [(0, slice(None), [0, 1]), (dj.tensor(X > 10),), (slice(None), [2, 0, 2])]:
        ic = tuple(j.cuda() if isinstance(j, dj.Tensor) else j for j in i)
        got = xc[ic]
        assert got.is_cuda
        np.testing.assert_array_equal(got.cpu().numpy(), x[i].numpy())
    y, yc = x.clone(), xc.clone()
    y[dj.tensor(X > 10)] = 0.0
    yc[dj.tensor(X > 10).cuda()] = 0.0
    np.testing.assert_array_equal(yc.cpu().numpy(), y.numpy())
    z = dj.zeros(3).cuda().index_put_((dj.tensor([0, 0, 2]).cuda(),), dj.tensor([1.0, 2.0, 3.0]).cuda(),
                                      accumulate=True)
    np.testing.assert_array_equal(z.cpu().numpy(), [3.0, 0.0, 3.0])
    a = xc.clone().requires_grad_(True)
    a[:, [1, 1, 0]].sum().backward()
    assert a.grad.is_cuda
    np.testing.assert_array_equal(a.grad.cpu().numpy()[0, :, 0], [1.0, 2.0, 0.0])


def _same(a, b):
    assert a.dtype is b.dtype and tuple(a.shape) == tuple(b.shape)
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_compiled_index_and_index_put_equal_eager():
    def gather_rows(x, idx):
        return x[idx, 1:] * 2.0 + 1.0

    def zero_large(x):
        y = x * 1.0
        y[y > 10] = 0.0
        y[dj.tensor([0, 1]), :, dj.tensor([3, 3])] = dj.tensor([[-1.0], [-2.0]])
        return y - 1.0

    x, idx = dj.tensor(X), dj.tensor([1, 0, 1])
    for fn, args in ((gather_rows, (x, idx)), (zero_large, (x,))):
        f = dj.compile(fn)
        for _ in range(2):
            _same(f(*args), fn(*args))
        assert f.cache_info().eager_calls == 0, f.explain()
        assert ("aten::index_put" if fn is zero_large else "aten::index.Tensor") in f.explain()


def test_compiled_writes_that_share_storage_run_eagerly():
    def into_input(x):
        x[x > 10] = 0.0
        return x * 2.0

    def with_a_view(x):
        y = x * 1.0
        v = y[0]
        y[y > 10] = 0.0
        return v + 1.0, y

    for fn in (into_input, with_a_view):
        f = dj.compile(fn)
        got, want = f(dj.tensor(X)), fn(dj.tensor(X))
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            _same(g, w)
        assert f.cache_info().eager_calls == 1
        assert "item assignment into a function input, a view" in f.explain()


def test_vmap_batches_index_and_index_put_without_the_loop():
    from dispatch_jit.func import vmap
    from dispatch_jit.kernels.batching.core import FALLBACK_WARNED
    x = dj.tensor(X)
    fns = [lambda a: a[dj.tensor([2, -1, 2])],
           lambda a: a[:, [1, 1]],
           lambda a: dj.ops.aten.index.Tensor(a, [dj.tensor([0, 1]), None]),
           lambda a: dj.ops.aten.index.Tensor(a, [dj.tensor([[0], [2]]), dj.tensor([1, 3])]),
           lambda a: dj.index_put(a, (dj.tensor([0, 0]),), a[1], accumulate=True),
           lambda a: dj.index_put(a, (None, dj.tensor([0, 3])), a[:, :1] * 2.0)]
    saved = set(FALLBACK_WARNED)
    FALLBACK_WARNED.clear()
    try:
        for f in fns:
            _same(vmap(f)(x), dj.stack([f(x[0]), f(x[1])]))
        assert not FALLBACK_WARNED
    finally:
        FALLBACK_WARNED.clear()
        FALLBACK_WARNED.update(saved)
