"""Basic indexing's view ops (kernels/shape/index.py): aten::slice.Tensor and aten::select.int
against torch, their shape rules with unknown sizes, tags, Meta and CUDA kernels, derivatives
(slice_backward/select_backward, to second order) and batching rules."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit import registry
from dispatch_jit.errors import OutOfBoundsError, ShapeError
from dispatch_jit.keys import DispatchKey
from dispatch_jit.ops import entries

A = entries("aten")
X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)

SLICES = [(0, None, None, 1), (1, 1, None, 1), (2, 1, 3, 1), (2, None, None, 2), (-1, -3, -1, 1), (1, 5, 9, 1),
          (0, -10, 10, 1)]
SELECTS = [(0, 0), (0, -1), (1, 2), (-1, 3), (2, -4)]


def test_slice_and_select_are_torchs_views():
    torch = pytest.importorskip("torch")
    t, tx = dj.tensor(X), torch.tensor(X)
    for dim, start, end, step in SLICES:
        got, want = A.slice(t, dim, start, end, step), torch.ops.aten.slice(tx, dim, start, end, step)
        assert got.shape == tuple(want.shape) and got.strides == want.stride()
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    for dim, index in SELECTS:
        got, want = A.select(t, dim, index), torch.select(tx, dim, index)
        assert got.shape == tuple(want.shape) and got.strides == want.stride()
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    v = A.select(A.slice(t, 2, 1, None, 2), 0, 1)       # a view: it shares t's storage
    v[...] = -1.0
    assert t.numpy()[1, :, 1::2].tolist() == [[-1.0, -1.0]] * 3 and t.numpy()[0].min() == 0.0


def test_errors_name_the_index():
    t = dj.tensor(X)
    with pytest.raises(OutOfBoundsError, match="index 3 is out of bounds for dimension 1 with size 3"):
        A.select(t, 1, 3)
    with pytest.raises(OutOfBoundsError, match="0-dim"):
        A.select(dj.tensor(1.0), 0, 0)
    with pytest.raises(ShapeError, match="step cannot be zero"):
        A.slice(t, 0, None, None, 0)
    with pytest.raises(ShapeError, match="axis 3 is out of range"):
        A.slice(t, 3)


def test_rules_tags_and_meta_kernels():
    for name, op in (("aten::slice.Tensor", "slice"), ("aten::select.int", "select")):
        entry = registry.lookup(name)
        assert "view" in entry.tags and "view_may_copy" not in entry.tags
        assert entry.shape_fn is not None and DispatchKey.Meta in entry.kernels
    sl, se = registry.lookup("aten::slice.Tensor"), registry.lookup("aten::select.int")
    assert sl.shape_fn((None, 5), 1, 1, None, 2) == (None, 2)
    assert se.shape_fn((None, 5), 0, 7) == (5,)          # an unknown size: the index is checked at run time
    meta = se.kernels[DispatchKey.Meta].fn(dj.tensor(X), 1, 0)
    assert meta.shape == (2, 4)


def test_gradients_are_torchs_to_second_order():
    torch = pytest.importorskip("torch")
    x = dj.tensor(X.astype(np.float64), requires_grad=True)
    tx = torch.tensor(X.astype(np.float64), requires_grad=True)
    y = A.select(A.slice(x, 2, 1, None, 2), 1, -1)
    ty = torch.select(torch.ops.aten.slice(tx, 2, 1, None, 2), 1, -1)
    assert type(y.grad_fn).__name__ == "SelectBackward"
    w = np.arange(4.0).reshape(2, 2)
    (g,) = dj.autograd.grad((y * y * dj.tensor(w)).sum(), x, create_graph=True)
    (tg,) = torch.autograd.grad((ty * ty * torch.tensor(w)).sum(), tx, create_graph=True)
    np.testing.assert_array_equal(g.detach().numpy(), tg.detach().numpy())
    (gg,) = dj.autograd.grad((g * g).sum(), x)
    (tgg,) = torch.autograd.grad((tg * tg).sum(), tx)
    np.testing.assert_array_equal(gg.numpy(), tgg.numpy())


def test_reversed_slice_gradient():
    # a negative step (NumPy's reversed view, which PyTorch refuses) puts the gradient back reversed
    x = dj.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (A.slice(x, 0, None, None, -1) * dj.tensor([1.0, 10.0, 100.0])).sum().backward()
    assert x.grad.tolist() == [100.0, 10.0, 1.0]


def test_batching_rules_shift_the_dim():
    x = dj.tensor(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")       # the looping fallback warns: these have rules
        got = dj.vmap(lambda r: A.select(A.slice(r, 1, 1, 3), 0, -1), in_dims=1)(x)
    np.testing.assert_array_equal(got.numpy(), np.moveaxis(X, 1, 0)[:, -1, 1:3])


def test_cuda_kernels_are_views_of_the_device_buffer():
    if not dj.cuda.is_available():
        pytest.skip("no CUDA (nor its simulator)")
    t = dj.tensor(X, device="cuda")
    v = A.select(A.slice(t, 2, 1, None, 2), 0, 1)
    assert v.is_cuda and v.shape == (3, 2)
    np.testing.assert_array_equal(v.cpu().numpy(), X[1, :, 1::2])
    g = dj.tensor(X, device="cuda", requires_grad=True)
    A.select(g, 1, 2).sum().backward()
    np.testing.assert_array_equal(g.grad.cpu().numpy(), (np.arange(3) == 2)[None, :, None] * np.ones_like(X))


def test_compiled_mode_records_them_as_views():
    def f(x):
        return A.select(A.slice(x, 1, 1, None, 2), 0, -1) * 2.0 + 1.0

    x = dj.tensor(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")       # a graph break warns (CompileWarning)
        got = dj.compile(f)(x)
        with dj.execution_mode("compiled"):
            lazy = f(x)
    want = f(x)
    for r in (got, lazy):
        np.testing.assert_array_equal(r.numpy(), want.numpy())
    from dispatch_jit.compiler.graph.views import is_view_op
    assert is_view_op(dj.ops.aten.slice.Tensor) and is_view_op(dj.ops.aten.select.int)
