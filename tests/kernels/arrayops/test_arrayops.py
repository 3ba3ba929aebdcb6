"""The ordering, scan and gather ops (kernels/arrayops) against NumPy: one oracle table, op x dtype."""

from __future__ import annotations

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import DTypeError, NoKernelError, OutOfBoundsError, ShapeError

X = np.array([[3.0, -1.0, np.nan, 2.0, -1.0], [0.0, -0.0, 5.0, 5.0, -2.0], [1.0, 1.0, 1.0, -3.0, 4.0]])
DTYPES = ["float32", "float64", "int8", "uint8", "int64", "bool", "float16"]


def _data(dt):
    a = X if np.dtype(dt).kind == "f" else np.nan_to_num(X)
    return a.astype(dt)


def _desc_order(a, axis):
    return a.shape[axis] - 1 - np.flip(np.argsort(np.flip(a, axis), axis=axis, kind="stable"), axis)


def _int_acc(a):
    return np.uint64 if a.dtype == np.uint64 else np.int64 if a.dtype.kind in "biu" else a.dtype


# name -> (dj call, NumPy reference)
ORACLE = {
    "sort": (lambda t: dj.sort(t, 1).values, lambda a: np.sort(a, 1, kind="stable")),
    "sort-desc-axis0": (lambda t: dj.sort(t, 0, descending=True)[0],
                        lambda a: np.take_along_axis(a, _desc_order(a, 0), 0)),
    "argsort": (lambda t: dj.argsort(t, 1), lambda a: np.argsort(a, 1, kind="stable")),
    "argsort-desc": (lambda t: dj.argsort(t, -1, True), lambda a: _desc_order(a, -1)),
    "cumsum": (lambda t: dj.cumsum(t, 1), lambda a: np.cumsum(a.astype(np.float64 if a.dtype.kind == "f"
                                                                        else _int_acc(a)), 1)),
    "cumprod": (lambda t: dj.cumprod(t, 0), lambda a: np.cumprod(a.astype(np.float64 if a.dtype.kind == "f"
                                                                          else _int_acc(a)), 0)),
    "nonzero": (lambda t: dj.nonzero(t), lambda a: np.argwhere(a)),
    "flip": (lambda t: dj.flip(t, [0, 1]), lambda a: np.flip(a, (0, 1))),
    "roll": (lambda t: dj.roll(t, [2, -1], [1, 0]), lambda a: np.roll(a, (2, -1), (1, 0))),
    "roll-flat": (lambda t: dj.roll(t, [3]), lambda a: np.roll(a, 3)),
    "tril": (lambda t: dj.tril(t, 1), lambda a: np.tril(a, 1)),
    "triu": (lambda t: dj.triu(t, -1), lambda a: np.triu(a, -1)),
    "index_select": (lambda t: dj.index_select(t, 1, dj.tensor([4, 0, 3, 0])),
                     lambda a: np.take(a, [4, 0, 3, 0], 1)),
    "take": (lambda t: dj.take(t, dj.tensor([[0, 14], [7, -1]])), lambda a: np.take(a, [[0, 14], [7, -1]])),
    "take_along_dim": (lambda t: dj.take_along_dim(t, dj.tensor([[1], [0], [4]]), 1),
                       lambda a: np.take_along_axis(a, np.array([[1], [0], [4]]), 1)),
}


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("name", sorted(ORACLE))
def test_op_matches_numpy(name, dt):
    a = _data(dt)
    fn, ref = ORACLE[name]
    got = fn(dj.from_numpy(a.copy())).numpy()
    want = ref(a)
    if want.dtype.kind == "f" and got.dtype == np.float16:
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3, equal_nan=True)
    else:
        np.testing.assert_array_equal(got.astype(want.dtype) if want.dtype.kind in "iub" else got, want)


def test_result_dtypes_are_pytorchs():
    assert dj.cumsum(dj.tensor([1, 2], dtype=dj.int8), 0).dtype is dj.int64
    assert dj.cumsum(dj.tensor([1, 2], dtype=dj.uint64), 0).dtype is dj.uint64
    assert dj.cumsum(dj.tensor([True, True]), 0).dtype is dj.int64
    assert dj.cumsum(dj.tensor([1, 2], dtype=dj.int8), 0, dtype=dj.float64).dtype is dj.float64
    assert dj.argsort(dj.tensor([2.0, 1.0])).dtype is dj.int64
    assert dj.nonzero(dj.tensor([[0, 1]])).shape == (1, 2)


def test_searchsorted_left_right_and_nan_last():
    s = dj.tensor([1.0, 2.0, 2.0, 3.0, float("nan")])
    v = dj.tensor([2.0, 0.0, 9.0, float("nan")])
    assert dj.searchsorted(s, v).tolist() == [1, 0, 4, 4]
    assert dj.searchsorted(s, v, right=True).tolist() == [3, 0, 4, 5]
    assert dj.searchsorted(s, v, side="right").tolist() == [3, 0, 4, 5]
    assert dj.searchsorted(s, v, out_int32=True).dtype is dj.int32


def test_sort_of_a_zero_dim_and_an_empty_tensor():
    assert dj.sort(dj.tensor(3.0)).values.shape == () and dj.argsort(dj.tensor(3.0)).shape == ()
    assert dj.searchsorted(dj.tensor([1.0, 2.0]), dj.tensor(1.5)).shape == ()
    assert dj.ops.aten.linalg_det(dj.eye(2)).shape == ()
    assert dj.sort(dj.zeros(0, 3), 0).values.shape == (0, 3)
    assert dj.cumsum(dj.zeros(2, 0), 0).shape == (2, 0)


def test_errors_name_the_op_and_the_fix():
    with pytest.raises(DTypeError, match="sort: complex"):
        dj.sort(dj.tensor([1j, 2j]))
    with pytest.raises(OutOfBoundsError, match="index 9 is out of bounds"):
        dj.index_select(dj.tensor([1, 2]), 0, dj.tensor([9]))
    with pytest.raises(IndexError):
        dj.take(dj.tensor([1, 2]), dj.tensor([-3]))
    with pytest.raises(ShapeError, match="axis 2 is out of range"):
        dj.sort(dj.tensor([1, 2]), 2)
    with pytest.raises(ShapeError, match="at least 2 dimensions"):
        dj.tril(dj.tensor([1, 2]))
    with pytest.raises(DTypeError, match="integer tensor"):
        dj.take(dj.tensor([1, 2]), dj.tensor([0.0]))


def test_cuda_tensors_get_a_clear_no_kernel_error():
    if not dj.cuda.is_available():
        pytest.skip("no CUDA device (nor simulator)")
    with pytest.raises(NoKernelError):
        dj.sort(dj.tensor([2.0, 1.0], device="cuda"))


# each row's gradient against finite differences (float64) and, when installed, against torch's
_GRAD_CASES = {
    "flip": lambda M, t: M.flip(t, [0, 1]),
    "roll": lambda M, t: M.roll(t, [1, -2], [0, 1]),
    "roll flattened": lambda M, t: M.roll(t, [3]),
    "tril": lambda M, t: M.tril(t, 1),
    "triu": lambda M, t: M.triu(t, -1),
    "index_select, repeated": lambda M, t: M.index_select(t, 1, M.tensor([0, 2, 2, 3])),
    "index_select dim 0": lambda M, t: M.index_select(t, 0, M.tensor([2, 2])),
    "take, repeated": lambda M, t: M.take(t, M.tensor([[0, 5], [5, 11]])),
    # negative indices count from the end in take and take_along_dim along a dim (PyTorch's too);
    # their gradient scatters to the element they read
    "take, negative": lambda M, t: M.take(t, M.tensor([[-1, 5], [-7, -12]])),
    "take_along_dim, negative": lambda M, t: M.take_along_dim(t, M.tensor([[-1], [2], [-4]]), 1),
    "take_along_dim": lambda M, t: M.take_along_dim(t, M.tensor([[0], [2], [1]]), 1),
    "take_along_dim flattened": lambda M, t: M.take_along_dim(t, M.tensor([1, 1, 7])),
    "take_along_dim broadcast": lambda M, t: M.take_along_dim(t[:1], M.tensor([[0, 1], [2, 2], [3, 3]]), 1),
}


@pytest.mark.parametrize("name", sorted(_GRAD_CASES))
def test_gradients_of_the_reordering_and_gathering_ops(name):
    """These ops used to have no derivative: their outputs did not require grad, so a loss that
    also reached the input some other way got a gradient without their part, silently."""
    f = _GRAD_CASES[name]
    a = np.random.default_rng(0).standard_normal((3, 4))
    x = dj.tensor(a, requires_grad=True)
    assert dj.autograd.gradcheck(lambda t: f(dj, t), (x,))
    torch = pytest.importorskip("torch")
    tx = torch.tensor(a, requires_grad=True)
    out, ref = f(dj, x), f(torch, tx)
    seed = np.random.default_rng(1).standard_normal(tuple(ref.shape))
    (out * dj.tensor(seed) + x.sum()).sum().backward()
    (ref * torch.tensor(seed) + tx.sum()).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_integer_results_do_not_require_grad():
    x = dj.tensor([2.0, 1.0], requires_grad=True)
    assert not dj.argsort(x).requires_grad and not dj.nonzero(x).requires_grad


def test_sort_cumsum_cumprod_gradients():
    # sort: gather's gradient; cumsum: the reversed cumsum; cumprod: exact through zeros
    x = dj.tensor([2.0, 1.0, 3.0], requires_grad=True)
    (dj.sort(x, descending=True).values * dj.tensor([1.0, 10.0, 100.0])).sum().backward()
    assert x.grad.tolist() == [10.0, 100.0, 1.0]
    x.grad = None
    dj.cumsum(x, 0).sum().backward()
    assert x.grad.tolist() == [3.0, 2.0, 1.0]
    z = dj.tensor([[2.0, 0.0, 3.0], [0.0, 0.0, 5.0]], dtype=dj.float64, requires_grad=True)
    assert dj.autograd.gradcheck(lambda t: dj.cumprod(t, 1), (z,))
    assert dj.autograd.gradcheck(lambda t: dj.cumprod(t, 0), (z,))


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
@pytest.mark.parametrize("dtype,acc", [(np.float32, np.float64), (np.complex64, np.complex128),
                                       (np.float16, np.float32)])
def test_scans_accumulate_in_pytorchs_accumulator_type(op, dtype, acc):
    """Each prefix is the wider running value rounded once (at::acc_type), not NumPy's running value
    in the result dtype: a long float32 scan drifts apart from torch's otherwise."""
    rng = np.random.default_rng(1)
    a = (rng.random(4000) + 0.5).astype(dtype) if op == "cumprod" else (rng.standard_normal(4000) * 100).astype(dtype)
    a = a[:40] if op == "cumprod" else a     # keep the products finite in float16
    want = getattr(np, op)(a.astype(acc)).astype(dtype)
    np.testing.assert_array_equal(getattr(dj, op)(dj.tensor(a), 0).numpy(), want)
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(getattr(dj, op)(dj.tensor(a), 0).numpy(), getattr(torch, op)(torch.from_numpy(a), 0).numpy())


def test_cumprod_past_float32s_range_is_inf_then_signed_zero_without_warnings():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = dj.cumprod(dj.tensor(np.array([1e30, 1e30, -0.0, 2.0], np.float32)), 0).numpy()
    np.testing.assert_array_equal(got, np.array([1e30, np.inf, -0.0, -0.0], np.float32))
    assert np.signbit(got[2:]).all()    # float32 running products give inf * 0 = nan here


def test_flip_and_roll_take_a_bare_int_and_varargs_as_torch():
    # int[] takes a bare int (the schema's rule): flip(1) and roll(1, 1) used to raise TypeError
    # from inside the kernel; the method flip takes PyTorch's *dims
    torch = pytest.importorskip("torch")
    a = np.arange(6).reshape(2, 3)
    t, tt = dj.tensor(a), torch.tensor(a)
    for got, want in ((t.flip(1), tt.flip(1)), (t.flip(0, 1), tt.flip(0, 1)), (t.flip([0]), tt.flip([0])),
                      (dj.flip(t, 1), tt.flip(1)), (t.roll(1, 1), tt.roll(1, 1)), (t.roll(2), tt.roll(2)),
                      (dj.roll(t, -1, 0), tt.roll(-1, 0))):
        assert got.tolist() == want.tolist()
    x = dj.tensor(a.astype(np.float64), requires_grad=True)
    (x.roll(1, 1) * dj.tensor(a.astype(np.float64))).sum().backward()       # the backward takes it too
    tx = torch.tensor(a.astype(np.float64), requires_grad=True)
    (tx.roll(1, 1) * torch.tensor(a.astype(np.float64))).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
