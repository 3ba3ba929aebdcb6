"""PyTorch's tensor methods that are no single op (dispatch_jit/tensor_methods.py): .data, the
in-place fills and scatters with the in-place rules (version counter, leaves, views, autograd),
is_floating_point; and inference_mode, rand_like/randn_like, as_tensor."""

from __future__ import annotations

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import AutogradError, DTypeError, ShapeError
from dispatch_jit.tensor import version_box


def test_data_shares_storage_without_history():
    w = dj.tensor([1.0, 2.0], requires_grad=True)
    y = w * 2
    d = y.data
    assert not d.requires_grad and d.grad_fn is None
    d[0] = 7.0
    assert y[0].item() == 7.0
    w.data = dj.tensor([5.0, 6.0, 7.0])
    assert w.requires_grad and w.tolist() == [5.0, 6.0, 7.0]
    (w * w).sum().backward()
    assert w.grad.tolist() == [10.0, 12.0, 14.0]
    w.data.zero_()                      # the optimizer idiom: no leaf error through .data
    assert w.tolist() == [0.0, 0.0, 0.0]


def test_fills_cast_and_count_versions():
    x = dj.zeros(3, dtype=dj.int32)
    v = version_box(x)[0]
    assert x.fill_(2.7).tolist() == [2, 2, 2] and version_box(x)[0] > v
    assert dj.ones(2).zero_().tolist() == [0.0, 0.0]
    assert dj.zeros(2).fill_(dj.tensor(3.0)).tolist() == [3.0, 3.0]
    with pytest.raises(DTypeError, match="0-dimensional"):
        dj.zeros(2).fill_(dj.ones(2))


def test_inplace_on_views_writes_through():
    base = dj.zeros(2, 3)
    base[1].fill_(5.0)
    base.t()[0].zero_()
    assert base.tolist() == [[0.0, 0.0, 0.0], [0.0, 5.0, 5.0]]
    x = dj.zeros(4)
    x.masked_fill_(dj.tensor([True, False, True, False]), 1.0)
    x.scatter_(0, dj.tensor([3]), dj.tensor([9.0]))
    x.scatter_add_(0, dj.tensor([3, 3]), dj.tensor([1.0, 1.0]))
    assert x.tolist() == [1.0, 0.0, 1.0, 11.0]


def test_leaf_requiring_grad_refuses_and_autograd_flows():
    w = dj.tensor([1.0, 2.0], requires_grad=True)
    for call in (lambda: w.fill_(1.0), lambda: w.zero_(), lambda: w.normal_(), lambda: w.uniform_(),
                 lambda: w.masked_fill_(w > 0, 0.0)):
        with pytest.raises(AutogradError, match="leaf Variable that requires grad"):
            call()
    with dj.no_grad():
        w.fill_(3.0)
    y = w * 1.0
    y.masked_fill_(dj.tensor([True, False]), 0.0)
    (y * dj.tensor([2.0, 3.0])).sum().backward()
    assert w.grad.tolist() == [0.0, 3.0]


@pytest.mark.torch
def test_inplace_gradients_match_torch():
    torch = pytest.importorskip("torch")
    idx = [[0, 2], [1, 1]]

    def run(m, x, src):
        y = x * 2
        y.scatter_add_(1, m.tensor(idx), src)
        y.masked_fill_(y > 5, 0.5)
        return (y * y).sum()

    a = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]])
    s = np.array([[1.0, 2.0], [3.0, 4.0]])
    xs, ts = [dj.tensor(v, requires_grad=True) for v in (a, s)], [torch.tensor(v, requires_grad=True) for v in (a, s)]
    run(dj, *xs).backward()
    run(torch, *ts).backward()
    for x, t in zip(xs, ts):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy())


def test_random_fills_and_likes():
    dj.manual_seed(0)
    x = dj.empty(20000, dtype=dj.float64).normal_(1.0, 2.0)
    assert abs(x.mean().item() - 1.0) < 0.1 and abs(x.std().item() - 2.0) < 0.1
    u = dj.empty(1000).uniform_(-2.0, -1.0)
    assert u.dtype is dj.float32 and -2.0 <= u.min().item() and u.max().item() < -1.0
    with pytest.raises(DTypeError, match="floating point"):
        dj.zeros(2, dtype=dj.int64).normal_()
    with pytest.raises(ValueError, match="std >= 0.0"):
        dj.zeros(2).normal_(0.0, -1.0)
    r = dj.randn_like(dj.zeros(2, 3, dtype=dj.float64))
    assert tuple(r.shape) == (2, 3) and r.dtype is dj.float64
    assert dj.rand_like(dj.zeros(4), dtype=dj.float16).dtype is dj.float16
    c = dj.rand_like(dj.zeros(2).cuda())
    assert c.is_cuda


def test_is_floating_point():
    assert dj.tensor([1.0]).is_floating_point() and not dj.tensor([1]).is_floating_point()
    assert dj.zeros(1, dtype=dj.float16).is_floating_point()
    assert not dj.zeros(1, dtype=dj.complex64).is_floating_point()


def test_inference_mode_context_and_decorator():
    w = dj.tensor([1.0], requires_grad=True)
    with dj.inference_mode():
        assert not dj.is_grad_enabled() and not (w * 2).requires_grad
    with dj.inference_mode(False):
        assert (w * 2).requires_grad

    @dj.inference_mode()
    def f(x):
        return x * 2
    assert not f(w).requires_grad and dj.is_grad_enabled()


def test_as_tensor_shares_memory_when_it_can():
    a = np.zeros(3)
    t = dj.as_tensor(a)
    a[0] = 5.0
    assert t[0].item() == 5.0
    assert dj.as_tensor(t) is t or dj.as_tensor(t)._data is t._data
    c = dj.as_tensor(a, dtype=dj.float32)      # a cast: a copy
    a[1] = 1.0
    assert c[1].item() == 0.0 and c.dtype is dj.float32
    assert dj.as_tensor([1, 2]).dtype is dj.int64


def test_real_and_imag_attributes():
    z = dj.tensor([1 + 2j, 3 - 1j], requires_grad=True)
    assert z.real.tolist() == [1.0, 3.0] and z.imag.tolist() == [2.0, -1.0]
    assert z.real.dtype == dj.float32 and z.is_complex() and not z.real.is_complex()
    (z.real * 2 + z.imag).sum().backward()
    assert z.grad.tolist() == [2 + 1j, 2 + 1j]          # PyTorch's: d/dx + i d/dy
    x = dj.tensor([1.0, 2.0])
    assert x.real is x
    with pytest.raises(DTypeError, match="imag is not implemented for tensors with non-complex"):
        x.imag
    # PyTorch's are views that write through; these are copies, so writing into one raises
    with pytest.raises(ShapeError, match="read-only"):
        z.detach().real[0] = 5.0
