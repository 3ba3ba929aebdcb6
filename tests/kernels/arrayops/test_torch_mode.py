"""dj.mode is torch.mode (the most frequent value along a dim, the smallest of a tie, the index of its
last occurrence); the execution mode's context manager is dj.execution_mode."""

import numpy as np
import pytest

import dispatch_jit as dj


def test_values_and_indices():
    r = dj.mode(dj.tensor([[3, 1, 3, 1, 2], [5, 5, 4, 4, 4]]))
    assert r.values.tolist() == [1, 4] and r.indices.tolist() == [3, 4]
    assert r.indices.dtype == dj.int64 and r.values.dtype == dj.int64


def test_dim_keepdim_and_zero_dim():
    x = dj.tensor([[2.0, 7.0], [2.0, 5.0], [9.0, 5.0]])
    r = x.mode(0, keepdim=True)
    assert r.values.shape == (1, 2) and r.values.tolist() == [[2.0, 5.0]] and r.indices.tolist() == [[1, 2]]
    s = dj.mode(dj.tensor(3.0))
    assert s.values.shape == () and s.values.item() == 3.0 and s.indices.item() == 0


def test_gradient_flows_to_the_chosen_element():
    x = dj.tensor([[3.0, 1.0, 3.0, 1.0, 2.0]], requires_grad=True)
    dj.mode(x, 1).values.sum().backward()
    assert x.grad.tolist() == [[0.0, 0.0, 0.0, 1.0, 0.0]]


def test_errors():
    with pytest.raises(TypeError, match=r"dj\.execution_mode\('compiled'\)"):
        dj.mode("compiled")
    with pytest.raises(IndexError, match="non-zero size"):
        dj.mode(dj.zeros((2, 0)), 1)
    with pytest.raises(TypeError, match="complex"):
        dj.mode(dj.tensor([1 + 1j]))


def test_execution_mode_is_the_context_manager():
    x = dj.tensor([1.0, 2.0])
    with dj.execution_mode("compiled"):
        y = x * 2.0 + 1.0
    assert y.tolist() == [3.0, 5.0]


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8, np.bool_])
def test_against_torch(dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    for shape, dim, keepdim in (((7, 9), 1, False), ((7, 9), 0, True), ((4, 5, 6), -2, False), ((1,), 0, False)):
        a = rng.integers(0, 4, shape).astype(dtype)
        got, want = dj.mode(dj.tensor(a), dim, keepdim), torch.mode(torch.from_numpy(a), dim, keepdim)
        np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
        np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
