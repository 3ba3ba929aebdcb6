"""``t[index]`` and ``t[index] = v`` (autograd/indexing.py, inplace.py): the basic part a chain
of the dispatcher's select/slice/unsqueeze views, recorded as torch records them, the store
one aten::copy_ into the view; the fast paths for one int, one slice and one index tensor."""

from __future__ import annotations

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import BroadcastError, OutOfBoundsError, ShapeError

X = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
INDICES = [0, -1, slice(1, None), slice(None, None, 2), (slice(None), 0), (1, slice(None, None, 2), None, 0),
           (None, 0, ..., None), ..., (), (Ellipsis, 1), (0, 1, 2), (slice(None), [0, 2]), (1, [[0], [2]], slice(1, None, 2)),
           (slice(np.int64(0), np.int64(1)),)]


def _names(node) -> list:
    out = []
    while node is not None:
        out.append(type(node).__name__)
        node = next((n for n, _ in getattr(node, "next_functions", ()) if n is not None), None)
    return out


def test_values_shapes_and_gradients_are_torchs():
    torch = pytest.importorskip("torch")
    for index in INDICES:
        x, tx = dj.tensor(X, requires_grad=True), torch.tensor(X, requires_grad=True)
        y, ty = x[index], tx[index]
        assert y.shape == tuple(ty.shape), index
        np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
        w = np.arange(y.numel(), dtype=np.float64).reshape(y.shape)
        (y * dj.tensor(w)).sum().backward()
        (ty * torch.tensor(w)).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


def test_basic_indexing_records_the_view_ops():
    x = dj.tensor(X, requires_grad=True)
    assert _names(x[0].grad_fn)[0] == "SelectBackward"
    assert _names(x[1:].grad_fn)[0] == "SliceBackward"
    assert _names(x[:, 0, None].grad_fn)[:2] == ["UnsqueezeBackward", "SelectBackward"]
    v = x.detach()[:]                  # a new view of all of x, not x
    assert v is not x
    v[0, 0, 0] = 99.0
    assert x.detach().numpy()[0, 0, 0] == 99.0


def test_errors_are_the_librarys():
    x = dj.tensor(X)
    with pytest.raises(OutOfBoundsError, match="index 5 is out of bounds for dimension 0 with size 2"):
        x[5]
    with pytest.raises(OutOfBoundsError, match="too many indices for tensor of dimension 3"):
        x[0, 0, 0, 0]
    with pytest.raises(OutOfBoundsError, match="0-dim"):
        dj.tensor(1.0)[0]
    with pytest.raises(ShapeError, match="step cannot be zero"):
        x[::0]
    with pytest.raises(BroadcastError, match=r"value tensor of shape \[4\] cannot be broadcast"):
        x[0, 0, :3] = dj.ones(4)


def test_assignment_broadcasts_casts_and_records():
    x = dj.zeros(2, 3)
    x[0:1] = dj.ones(1, 1, 3)          # leading size-1 dims dropped, as PyTorch's
    x[1, 1:] = np.array([7, 8])
    assert x.tolist() == [[1.0, 1.0, 1.0], [0.0, 7.0, 8.0]]
    i = dj.zeros(3, dtype=dj.int32)
    i[0:2] = dj.tensor([1.5, 9.9])
    assert i.tolist() == [1, 9, 0]
    w = dj.ones(3, requires_grad=True)
    y = w * 2
    y[1] = w[0] * 5
    y.sum().backward()
    assert w.grad.tolist() == [7.0, 0.0, 2.0]


def test_cuda_indexing_and_assignment():
    if not dj.cuda.is_available():
        pytest.skip("no CUDA (nor its simulator)")
    x = dj.tensor(X, device="cuda")
    np.testing.assert_array_equal(x[1, :, None, ::2].cpu().numpy(), X[1, :, None, ::2])
    x[0, 1] = 5.0
    x[1, :, 1:3] = dj.tensor(np.ones((3, 2)), device="cuda")
    x[1, 0, :2] = np.array([-1.0, -2.0])         # a host array moves to the device
    want = X.copy()
    want[0, 1], want[1, :, 1:3], want[1, 0, :2] = 5.0, 1.0, [-1.0, -2.0]
    np.testing.assert_array_equal(x.cpu().numpy(), want)
    with pytest.raises(ShapeError, match="read-only"):
        dj.zeros(3, device="cuda").expand((2, 3))[0] = 1.0


def test_a_tuple_of_integer_tensors_is_the_general_paths():
    """``x[i0, i1]`` with integer index tensors (the loss's ``logp[arange(N), y]``) goes straight to
    aten::index (autograd/indexing._int_tensors): the same values and gradients as split_index's
    path; masks, uint8, a tensor beside a slice or too many indices take the general path."""
    from dispatch_jit.autograd import indexing
    rows, cols = dj.tensor([0, 1, 1, 0]), dj.tensor(np.array([2, 0, 2, 1], np.int32))
    cases = [(rows, cols), (rows,), (dj.tensor(1), cols), (dj.tensor([[0], [1]]), cols, dj.tensor([1, 3, 0, 3]))]
    for index in cases:
        x, xg = dj.tensor(X, requires_grad=True), dj.tensor(X, requires_grad=True)
        y, yg = x[index], indexing._general(xg, index)
        np.testing.assert_array_equal(y.detach().numpy(), yg.detach().numpy())
        assert type(y.grad_fn).__name__ == type(yg.grad_fn).__name__ == "IndexBackward"
        y.sum().backward()
        yg.sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), xg.grad.numpy())
    x = dj.tensor(X)
    mask = dj.tensor([True, False])
    np.testing.assert_array_equal(x[mask, rows[:1]].numpy(), X[np.array([True, False]), np.array([0])])
    np.testing.assert_array_equal(x[dj.tensor(np.array([1, 0], np.uint8)), rows[:1]].numpy(),
                                  X[np.array([True, False]), np.array([0])])   # uint8 is a mask, as torch's
    with pytest.raises(OutOfBoundsError, match="too many indices for tensor of dimension 3"):
        x[rows, rows, rows, rows]
    with pytest.raises(OutOfBoundsError, match="tensors used as indices must be long"):
        x[rows, dj.tensor([0.0, 1.0, 1.0, 0.0])]
