"""Autograd safety: version counters on saved tensors, in-place ops on leaves
and non-leaves (history rebasing), and gradients through views."""

from __future__ import annotations

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import AutogradError

try:
    import torch
except ImportError:  # the oracle is optional
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


def T(values, requires_grad=True):
    return dj.tensor(values, dtype=dj.float64, requires_grad=requires_grad)


def _both(fn, *values):
    """Run ``fn(M, mk)`` with dispatch_jit and with torch; return both results."""
    ours = fn(dj, lambda v, g=True: dj.tensor(v, dtype=dj.float64, requires_grad=g))
    theirs = fn(torch, lambda v, g=True: torch.tensor(v, dtype=torch.float64, requires_grad=g))
    return ours, theirs


# -- version counter ----------------------------------------------------------------------------------
def test_modified_saved_input_raises_at_backward():
    x = T([1.0, 2.0])
    y = x * 2
    z = y.sin()                       # saves y at version 0
    y.add_(1.0)
    with pytest.raises(AutogradError) as e:
        z.sum().backward()
    msg = str(e.value)
    assert "one of the variables needed for gradient computation has been modified by an inplace operation" in msg
    assert "is at version 1; expected version 0" in msg and "SinBackward" in msg and "float64 [2]" in msg


def test_modified_saved_output_raises_at_backward():
    x = T([1.0, 2.0])
    z = x.exp()                       # saves its own result
    z.mul_(2.0)
    with pytest.raises(AutogradError, match=r"result of ExpBackward\) is at version 1; expected version 0"):
        z.sum().backward()


def test_modification_through_a_view_or_alias_is_seen():
    x = T([1.0, 2.0, 3.0])
    y = x * 1.0
    z = y * y                         # saves y
    with dj.no_grad():
        y[1:].mul_(2.0)               # same storage, same counter
    with pytest.raises(AutogradError, match="is at version 1; expected version 0"):
        z.sum().backward()
    y = x * 1.0
    z = y.cos()
    y.detach().add_(1.0)              # detach shares the counter
    with pytest.raises(AutogradError, match="is at version 1"):
        z.sum().backward()


def test_unmodified_saved_tensors_are_fine():
    x = T([1.0, 2.0])
    y = x * 2
    z = y.sin()
    w = y + 0.0                       # reading y is fine
    (z + w).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.cos([2.0, 4.0]) + 2)


# -- in-place on leaves -------------------------------------------------------------------------------
def test_in_place_on_a_leaf_that_requires_grad_raises():
    x = T([1.0, 2.0])
    with pytest.raises(AutogradError, match="leaf Variable that requires grad is being used in an in-place"):
        x.add_(1.0)
    with pytest.raises(AutogradError, match="leaf Variable that requires grad"):
        x.mul_(T([2.0, 2.0], requires_grad=False))
    with pytest.raises(AutogradError, match="leaf Variable that requires grad"):
        x[0] = 5.0
    np.testing.assert_array_equal(x.detach().numpy(), [1.0, 2.0])    # nothing was written
    with dj.no_grad():                # the optimizer-step idiom
        x.sub_(0.5)
        x[1] = 7.0
    np.testing.assert_array_equal(x.detach().numpy(), [0.5, 7.0])
    assert x.is_leaf and x.requires_grad


def test_in_place_on_a_view_of_a_leaf_raises():
    x = T([1.0, 2.0, 3.0])
    with pytest.raises(AutogradError, match="view of a leaf Variable that requires grad"):
        x[1:].mul_(2.0)
    with pytest.raises(AutogradError, match="view of a leaf Variable that requires grad"):
        x.reshape((3, 1)).add_(1.0)
    np.testing.assert_array_equal(x.detach().numpy(), [1.0, 2.0, 3.0])


# -- in-place on non-leaves: history is rebased --------------------------------------------------------
@needs_torch
def test_in_place_chain_on_a_non_leaf_matches_torch():
    def run(M, mk):
        x = mk([0.5, -1.0, 2.0])
        y = x * 2
        y.add_(x)
        y.mul_(3.0)
        y.sin_()
        (y * y).sum().backward()
        return x.grad.detach().numpy(), y.detach().numpy()
    (gx, y), (tgx, ty) = _both(run)
    np.testing.assert_allclose(y, ty)
    np.testing.assert_allclose(gx, tgx)


@needs_torch
def test_in_place_with_a_grad_requiring_operand_matches_torch():
    def run(M, mk):
        x, w = mk([1.0, 2.0, 3.0]), mk([0.5, -0.5, 2.0])
        a = M.zeros(3, dtype=M.float64)          # does not require grad ...
        a.add_(x)                                # ... until it takes in x
        a.mul_(w)
        (a * a).sum().backward()
        return x.grad.numpy(), w.grad.numpy(), a.requires_grad, a.is_leaf
    ours, theirs = _both(run)
    assert ours[2:] == theirs[2:] == (True, False)
    for a, b in zip(ours[:2], theirs[:2]):
        np.testing.assert_allclose(a, b)


def test_in_place_grad_fn_names():
    x = T([1.0, 2.0])
    y = x * 2
    y.exp_()
    assert repr(y.grad_fn) == "<ExpBackward>" and not y.is_leaf
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp([2.0, 4.0]))


# -- views ---------------------------------------------------------------------------------------------
def test_gradient_through_transpose_view():
    x = T([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    c = T([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], requires_grad=False)
    v = x.T
    assert np.shares_memory(v.numpy(), x.numpy()) and repr(v.grad_fn) == "<PermuteBackward>"
    (v * c).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]])


def test_gradient_through_slices():
    x = T([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    v = x[1:]
    assert np.shares_memory(v.numpy(), x.numpy())
    (v * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0, 0.0, 0.0], [3.0, 3.0, 3.0]])
    x.grad = None
    (x[:, 1] * x[:, ::2].sum(axis=1)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[2.0, 4.0, 2.0], [5.0, 10.0, 5.0]])
    x.grad = None
    (x[..., None, 0] ** 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[2.0, 0.0, 0.0], [8.0, 0.0, 0.0]])
    x.grad = None
    e = x[1, 2]                       # all integers: a 0-d view, not a NumPy scalar
    assert e.shape == () and np.shares_memory(e.numpy(), x.numpy())
    (e * x[0][1] * 3).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0, 18.0, 0.0], [0.0, 0.0, 6.0]])


def test_gradient_through_reshape_and_expand():
    x = T([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    x.reshape((3, 2)).sum(axis=0).backward(T([1.0, 10.0], requires_grad=False))
    np.testing.assert_array_equal(x.grad.numpy(), [[1.0, 10.0, 1.0], [10.0, 1.0, 10.0]])
    v = T([1.0, 2.0])
    e = v.reshape((2, 1)).expand((2, 3))
    assert e.shape == (2, 3) and np.shares_memory(e.numpy(), v.numpy())
    (e * T([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=False)).sum().backward()
    np.testing.assert_array_equal(v.grad.numpy(), [6.0, 15.0])


def test_gradient_through_index_tensors():
    x = T([1.0, 2.0, 3.0])
    idx = dj.tensor([0, 2, 2])
    (x[idx] * T([1.0, 2.0, 3.0], requires_grad=False)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 0.0, 5.0])      # repeated indices accumulate
    x.grad = None
    (x[dj.tensor([True, False, True])] * 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 0.0, 2.0])
    m = T([[1.0, 2.0], [3.0, 4.0]])
    (m[dj.tensor([1, 0, 1]), 1] * 1.0).sum().backward()
    np.testing.assert_array_equal(m.grad.numpy(), [[0.0, 1.0], [0.0, 2.0]])


def test_gradcheck_through_views():
    a = np.random.default_rng(3).uniform(-1, 1, (3, 4))
    x = dj.from_numpy(a).requires_grad_()
    idx = dj.tensor([2, 0, 2])
    assert dj.autograd.gradcheck(lambda t: (t.T[1:, idx] * t[:, :3].T).exp(), (x,))


@needs_torch
def test_in_place_on_a_view_of_a_non_leaf_flows_to_the_base():
    def run(M, mk):
        x = mk([1.0, 2.0, 3.0])
        y = x * 1.0
        v = y[1:]
        v.mul_(2.0)                   # writes into y
        (y * y).sum().backward()
        return x.grad.numpy(), y.detach().numpy()
    (gx, y), (tgx, ty) = _both(run)
    np.testing.assert_array_equal(y, ty)
    np.testing.assert_allclose(gx, tgx)


@needs_torch
def test_in_place_on_a_reshaped_view_with_grad_operand_matches_torch():
    def run(M, mk):
        x, w = mk([[1.0, 2.0], [3.0, 4.0]]), mk([0.5, -1.0])
        y = x * 1.0
        y.reshape((4,))[:2].mul_(w)
        (y * y).sum().backward()
        return x.grad.numpy(), w.grad.numpy(), y.detach().numpy()
    ours, theirs = _both(run)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b)


@needs_torch
def test_item_assignment_on_a_non_leaf_matches_torch():
    def run(M, mk):
        x = mk([1.0, 2.0, 3.0])
        y = x * 1.0
        y[0] = 10.0
        (y * y).sum().backward()
        return x.grad.numpy()
    ours, theirs = _both(run)
    np.testing.assert_allclose(ours, theirs)       # torch: [0, 4, 6]


@needs_torch
def test_item_assignment_of_a_tensor_that_requires_grad_matches_torch():
    def run(M, mk):
        x = mk([1.0, 2.0, 3.0])
        v = mk([5.0])
        y = x * 2.0
        y[1:2] = v * 3.0
        (y * y).sum().backward()
        return np.concatenate([x.grad.numpy(), v.grad.numpy()])
    ours, theirs = _both(run)
    np.testing.assert_allclose(ours, theirs)
