"""Tensor.new_zeros/new_ones/new_full/new_empty/new_tensor and type_as (dispatch_jit/tensor_factories.py):
dtype and device follow self unless given, shapes as ints or a tuple, against PyTorch when installed."""

import numpy as np
import pytest

import dispatch_jit as dj


@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_new_factories_take_self_dtype(dtype):
    x = dj.ones(2, dtype=getattr(dj, dtype))
    for t, want in ((x.new_zeros(2, 3), np.zeros((2, 3))), (x.new_zeros((2, 3)), np.zeros((2, 3))),
                    (x.new_ones([4]), np.ones(4)), (x.new_full((2,), 3), np.full(2, 3)),
                    (x.new_tensor([[1, 2]]), np.array([[1, 2]]))):
        assert t.dtype == x.dtype and t.device == x.device
        np.testing.assert_array_equal(t.numpy(), want.astype(dtype))
    assert x.new_empty(3, 1).shape == (3, 1) and x.new_empty(()).dtype == x.dtype
    assert x.new_full((1,), 2.5, dtype=dj.float32).dtype == dj.float32
    assert x.new_zeros(2, dtype=dj.bool).tolist() == [False, False]


def test_new_tensor_copies_and_requires_grad():
    w = dj.tensor([1.0, 2.0], requires_grad=True)
    c = w.new_tensor(w)
    assert c.grad_fn is None and not c.requires_grad
    c[0] = 9.0
    assert w.tolist() == [1.0, 2.0]
    a = np.array([1, 2])
    t = w.new_tensor(a, requires_grad=True)
    a[0] = 5
    assert t.requires_grad and t.tolist() == [1.0, 2.0]
    assert w.new_ones(2, requires_grad=True).requires_grad


def test_type_as():
    i, f = dj.tensor([1, 2]), dj.tensor([0.5], dtype=dj.float64)
    out = i.type_as(f)
    assert out.dtype == dj.float64 and out.tolist() == [1.0, 2.0]
    assert f.type_as(f) is f
    with pytest.raises(TypeError, match="argument 'other' must be Tensor"):
        i.type_as(np.ones(1))


def test_against_torch():
    torch = pytest.importorskip("torch")
    for dt in ("float32", "int64"):
        x, tx = dj.ones(2, dtype=getattr(dj, dt)), torch.ones(2, dtype=getattr(torch, dt))
        pairs = [(x.new_zeros(2, 3), tx.new_zeros(2, 3)), (x.new_ones((1, 2)), tx.new_ones((1, 2))),
                 (x.new_full((3,), 7), tx.new_full((3,), 7)), (x.new_tensor([1.7, 2]), tx.new_tensor([1.7, 2])),
                 (x.type_as(dj.ones(1, dtype=dj.float64)), tx.type_as(torch.ones(1, dtype=torch.float64)))]
        for mine, theirs in pairs:
            assert str(mine.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
            np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
