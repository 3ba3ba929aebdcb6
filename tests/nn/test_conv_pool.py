"""Convolution and pooling (aten::convolution, max_pool2d, avg_pool2d and their backward ops):
values and gradients against PyTorch when installed, finite differences always, PyTorch's error
messages, and compiled/lazy results equal to eager ones."""

import numpy as np
import pytest

import dispatch_jit as dj
import dispatch_jit.nn.functional as F
from dispatch_jit.errors import DTypeError, SchemaError, ShapeError

try:
    import torch
    import torch.nn.functional as TF
except ImportError:
    torch = TF = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")
RNG = np.random.default_rng(7)
TOL = {np.float32: dict(rtol=1e-4, atol=1e-5), np.float64: dict(rtol=1e-10, atol=1e-12)}


def _both(fn_dj, fn_torch, arrays, dtype, grad_seed=0):
    """Run both on fresh leaves of ``arrays`` (None stays None); compare the output and the
    gradients of a random projection of it."""
    ours = [None if a is None else dj.tensor(a.astype(dtype), requires_grad=True) for a in arrays]
    theirs = [None if a is None else torch.tensor(a.astype(dtype), requires_grad=True) for a in arrays]
    y, ty = fn_dj(*ours), fn_torch(*theirs)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), **TOL[dtype])
    g = np.random.default_rng(grad_seed).standard_normal(tuple(ty.shape)).astype(dtype)
    y.backward(dj.tensor(g))
    ty.backward(torch.tensor(g))
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a is not None:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), **TOL[dtype], err_msg=f"input {i}")


CONV2D = [  # (x shape, w shape, stride, padding, dilation, groups, bias)
    ((2, 3, 6, 5), (4, 3, 3, 3), 1, 0, 1, 1, True),
    ((2, 4, 7, 8), (6, 2, 3, 2), (2, 1), (1, 2), (1, 2), 2, True),
    ((1, 4, 5, 5), (4, 1, 2, 2), 2, 1, 1, 4, False),        # depthwise
    ((3, 6, 5), (6, 3, 1, 1), 1, 0, 1, 1, True),             # unbatched, 1x1
    ((2, 2, 6, 6), (2, 2, 4, 2), 1, "same", (1, 2), 1, True),  # 'same' with an even kernel: asymmetric
    ((2, 2, 6, 6), (3, 2, 3, 3), 1, "valid", 1, 1, False),
]


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("xs,ws,stride,padding,dilation,groups,bias", CONV2D)
def test_conv2d_matches_torch(dtype, xs, ws, stride, padding, dilation, groups, bias):
    arrays = [RNG.standard_normal(xs), RNG.standard_normal(ws), RNG.standard_normal(ws[0]) if bias else None]
    _both(lambda x, w, b: F.conv2d(x, w, b, stride, padding, dilation, groups),
          lambda x, w, b: TF.conv2d(x, w, b, stride, padding, dilation, groups), arrays, dtype)


@needs_torch
@pytest.mark.parametrize("xs,ws,stride,padding,dilation,groups", [
    ((2, 3, 9), (4, 3, 3), 1, 0, 1, 1), ((2, 4, 10), (4, 2, 3), 2, 2, 2, 2), ((3, 8), (2, 3, 4), 1, "same", 1, 1)])
def test_conv1d_matches_torch(xs, ws, stride, padding, dilation, groups):
    arrays = [RNG.standard_normal(xs), RNG.standard_normal(ws), RNG.standard_normal(ws[0])]
    _both(lambda x, w, b: F.conv1d(x, w, b, stride, padding, dilation, groups),
          lambda x, w, b: TF.conv1d(x, w, b, stride, padding, dilation, groups), arrays, np.float64)


def test_conv_gradients_match_finite_differences():
    x = dj.tensor(RNG.standard_normal((2, 2, 5, 4)), requires_grad=True)
    w = dj.tensor(RNG.standard_normal((2, 1, 2, 3)), requires_grad=True)
    b = dj.tensor(RNG.standard_normal(2), requires_grad=True)
    assert dj.autograd.gradcheck(lambda x, w, b: F.conv2d(x, w, b, (2, 1), 1, (1, 2), 2), (x, w, b))
    x1 = dj.tensor(RNG.standard_normal((2, 2, 7)), requires_grad=True)
    w1 = dj.tensor(RNG.standard_normal((3, 2, 3)), requires_grad=True)
    assert dj.autograd.gradcheck(lambda x, w: F.conv1d(x, w, None, 2, 1, 2), (x1, w1))


def test_conv_values_match_a_direct_sum():
    """Without torch too: the im2col product against the definition's loops."""
    x, w = RNG.standard_normal((2, 4, 5, 6)), RNG.standard_normal((4, 2, 2, 3))
    got = F.conv2d(dj.tensor(x), dj.tensor(w), None, (1, 2), (1, 0), (2, 1), 2).numpy()
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (0, 0)))
    want = np.zeros(got.shape)
    for n, o, i, j in np.ndindex(*got.shape):
        g = o // 2
        for c, a, b in np.ndindex(2, 2, 3):
            want[n, o, i, j] += xp[n, 2 * g + c, i + 2 * a, 2 * j + b] * w[o, c, a, b]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_conv_errors_name_what_was_wrong():
    x = dj.ones(2, 3, 5, 5)
    with pytest.raises(ShapeError, match=r"expected input\[2, 3, 5, 5\] to have 4 channels, but got 3 channels"):
        F.conv2d(x, dj.ones(8, 4, 3, 3))
    with pytest.raises(ShapeError, match="expected bias to be 1-dimensional with 8 elements"):
        F.conv2d(x, dj.ones(8, 3, 3, 3), dj.ones(4))
    with pytest.raises(ShapeError, match=r"Kernel size can't be greater than actual input size"):
        F.conv2d(x, dj.ones(1, 3, 6, 6))
    with pytest.raises(SchemaError, match="non-positive stride"):
        F.conv2d(x, dj.ones(1, 3, 3, 3), stride=0)
    with pytest.raises(ShapeError, match="divisible by 2 at dimension 0"):
        F.conv2d(dj.ones(1, 4, 5, 5), dj.ones(3, 2, 3, 3), groups=2)
    with pytest.raises(ShapeError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) input to conv2d"):
        F.conv2d(dj.ones(5, 5), dj.ones(1, 1, 3, 3))
    with pytest.raises(SchemaError, match="padding='same' is not supported for strided convolutions"):
        F.conv2d(x, dj.ones(1, 3, 3, 3), stride=2, padding="same")
    with pytest.raises(DTypeError, match="floating point or integer input, got bool"):
        F.conv2d(dj.ones(1, 1, 3, 3, dtype=dj.bool), dj.ones(1, 1, 2, 2, dtype=dj.bool))
    with pytest.raises(DTypeError, match="should be the same"):
        F.conv2d(x, dj.ones(1, 3, 3, 3, dtype=dj.float64))


POOL2D = [  # kernel, stride, padding, dilation, ceil_mode
    (2, None, 0, 1, False), (3, 2, 1, 1, True), ((2, 3), (1, 2), (1, 1), (2, 1), False), (3, 2, 0, 1, True)]


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k,s,p,d,ceil", POOL2D)
def test_max_pool2d_values_indices_and_gradients_match_torch(dtype, k, s, p, d, ceil):
    x = RNG.standard_normal((2, 3, 7, 6))
    x[0, 0, :2, :2] = 1.5                           # ties: the first maximum wins, as PyTorch's
    _both(lambda t: F.max_pool2d(t, k, s, p, d, ceil), lambda t: TF.max_pool2d(t, k, s, p, d, ceil), [x], dtype)
    _, idx = F.max_pool2d(dj.tensor(x.astype(dtype)), k, s, p, d, ceil, return_indices=True)
    _, tidx = TF.max_pool2d(torch.tensor(x.astype(dtype)), k, s, p, d, ceil, return_indices=True)
    assert idx.dtype == dj.int64 and np.array_equal(idx.numpy(), tidx.numpy())


@needs_torch
@pytest.mark.parametrize("k,s,p,ceil,include,divisor", [
    (2, None, 0, False, True, None), (3, 2, 1, True, True, None), (3, 2, 1, True, False, None),
    ((2, 3), (1, 2), (1, 1), False, False, 5)])
def test_avg_pool2d_matches_torch(k, s, p, ceil, include, divisor):
    x = RNG.standard_normal((2, 3, 7, 6))
    _both(lambda t: F.avg_pool2d(t, k, s, p, ceil, include, divisor),
          lambda t: TF.avg_pool2d(t, k, s, p, ceil, include, divisor), [x], np.float64)


@needs_torch
def test_1d_adaptive_and_nan_pooling_match_torch():
    x = RNG.standard_normal((2, 3, 9))
    _both(lambda t: F.max_pool1d(t, 3, 2, 1, 2), lambda t: TF.max_pool1d(t, 3, 2, 1, 2), [x], np.float64)
    _both(lambda t: F.avg_pool1d(t, 4, 3, 2, True, False), lambda t: TF.avg_pool1d(t, 4, 3, 2, True, False), [x],
          np.float64)
    _, i = F.max_pool1d(dj.tensor(x), 3, return_indices=True)
    assert np.array_equal(i.numpy(), TF.max_pool1d(torch.tensor(x), 3, return_indices=True)[1].numpy())
    y = RNG.standard_normal((1, 2, 7, 5))
    for size in (1, (3, 2), (None, 3), 7):
        _both(lambda t: F.adaptive_avg_pool2d(t, size), lambda t: TF.adaptive_avg_pool2d(t, size), [y], np.float64)
    nan = np.arange(8.0).reshape(1, 1, 2, 4)
    nan[0, 0, 0, 1] = np.nan
    _both(lambda t: F.max_pool2d(t, 2), lambda t: TF.max_pool2d(t, 2), [nan], np.float64)


def test_pool_gradients_match_finite_differences():
    x = dj.tensor(RNG.standard_normal((2, 2, 5, 6)), requires_grad=True)   # distinct values: max is smooth here
    assert dj.autograd.gradcheck(lambda t: F.max_pool2d(t, 3, 2, 1, 1, True), (x,))
    assert dj.autograd.gradcheck(lambda t: F.avg_pool2d(t, (2, 3), (2, 1), (1, 1), False, False), (x,))
    assert dj.autograd.gradcheck(lambda t: F.adaptive_avg_pool2d(t, (2, 4)), (x,))


def test_pool_values_without_torch():
    x = dj.arange(16.0).reshape(1, 1, 4, 4)
    assert F.max_pool2d(x, 2).numpy().ravel().tolist() == [5.0, 7.0, 13.0, 15.0]
    assert F.avg_pool2d(x, 2).numpy().ravel().tolist() == [2.5, 4.5, 10.5, 12.5]
    # count_include_pad=False divides a corner window by its 1 real element
    assert F.avg_pool2d(x, 2, 2, 1, count_include_pad=False).numpy()[0, 0, 0, 0] == 0.0
    assert F.avg_pool2d(x, 2, 2, 1).numpy()[0, 0, 2, 2] == 15.0 / 4


def test_pool_errors_name_what_was_wrong():
    x = dj.ones(1, 1, 4, 4)
    with pytest.raises(SchemaError, match="pad should be at most half of effective kernel size"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(SchemaError, match="pad should be at most half"):    # half the kernel, not the dilated one
        F.max_pool2d(x, 3, padding=2, dilation=2)
    with pytest.raises(ShapeError, match="Output size is too small"):
        F.max_pool2d(dj.ones(1, 1, 2, 2), 3)
    with pytest.raises(ShapeError, match="Expected 3D or 4D"):
        F.max_pool2d(dj.ones(4, 4), 2)
    with pytest.raises(SchemaError, match="divisor must be not zero"):
        F.avg_pool2d(x, 2, divisor_override=0)
    with pytest.raises(DTypeError, match="floating point or integer input, got bool"):
        F.max_pool2d(dj.ones(1, 1, 4, 4, dtype=dj.bool), 2)
    # PyTorch 2.13's CPU kernels: avg_pool2d takes int64 but no other integer; max_pool1d and
    # adaptive_avg_pool2d no integer at all
    with pytest.raises(DTypeError, match="floating point or int64 input, got int32"):
        F.avg_pool2d(dj.ones(1, 1, 4, 4, dtype=dj.int32), 2)
    with pytest.raises(DTypeError, match="max_pool1d_impl"):
        F.max_pool1d(dj.ones(1, 1, 4, dtype=dj.int64), 2)
    with pytest.raises(DTypeError, match="adaptive_avg_pool2d"):
        F.adaptive_avg_pool2d(dj.ones(1, 4, 4, dtype=dj.int64), 2)
    with pytest.raises(SchemaError, match="stride should be greater than zero"):
        F.avg_pool2d(x, 2, stride=0)


def _cnn_loss(x, w, b, w2):
    h = F.max_pool2d(F.relu(F.conv2d(x, w, b, padding=1)), 2)
    return F.avg_pool2d(F.conv2d(h, w2, stride=1), 2).sum()


def test_compiled_and_lazy_results_equal_eager():
    base = [RNG.standard_normal(s).astype(np.float32) for s in ((2, 2, 8, 8), (3, 2, 3, 3), (3,), (2, 3, 3, 3))]

    def run(fn):
        ps = [dj.tensor(a, requires_grad=True) for a in base]
        loss = fn(*ps)
        loss.backward()
        return [loss.detach().numpy()] + [p.grad.numpy() for p in ps]

    eager = run(_cnn_loss)
    compiled = run(dj.compile(_cnn_loss))
    with dj.execution_mode("compiled"):
        lazy = run(_cnn_loss)
    for a, b, c in zip(eager, compiled, lazy):
        assert np.array_equal(a, b) and np.array_equal(a, c)


@needs_torch
@pytest.mark.parametrize("nd,stride,padding,dilation,groups", [(2, 1, 1, 1, 1), (2, (2, 1), (0, 2), (1, 2), 2),
                                                               (1, 2, 1, 2, 1)])
def test_conv_double_backward_matches_torch(nd, stride, padding, dilation, groups):
    xs, ws = ((2, 4, 6, 5), (4, 4 // groups, 3, 2)) if nd == 2 else ((2, 4, 9), (3, 4, 3))
    x, w = RNG.standard_normal(xs), RNG.standard_normal(ws)
    fn, tfn = (F.conv2d, TF.conv2d) if nd == 2 else (F.conv1d, TF.conv1d)

    def run(lib, conv, x, w):
        y = conv(x, w, None, stride, padding, dilation, groups)
        gx, gw = lib.autograd.grad((y * y).sum(), [x, w], create_graph=True)
        ((gx * gx).sum() + (gw * gw * gw).sum()).backward()
        return x.grad, w.grad
    ours = run(dj, fn, dj.tensor(x, requires_grad=True), dj.tensor(w, requires_grad=True))
    theirs = run(torch, tfn, torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-9, atol=1e-9)


def test_conv_double_backward_matches_finite_differences():
    x0, w0 = RNG.standard_normal((1, 2, 4, 5)), RNG.standard_normal((2, 1, 2, 2))

    def objective(x, w):    # a function of the first gradients, so its gradient is a second derivative
        y = F.conv2d(x, w, None, (2, 1), 1, (1, 2), 2)
        gx, gw = dj.autograd.grad((y * y).sum(), [x, w], create_graph=True)
        return (gx * gx).sum() + (gw * gw * gw).sum()

    x, w = dj.tensor(x0, requires_grad=True), dj.tensor(w0, requires_grad=True)
    objective(x, w).backward()
    eps = 1e-6
    for arr, grad, which in ((x0, x.grad.numpy(), 0), (w0, w.grad.numpy(), 1)):
        for idx in np.ndindex(arr.shape):
            vals = []
            for sign in (1, -1):
                a = [x0.copy(), w0.copy()]
                a[which][idx] += sign * eps
                vals.append(objective(*(dj.tensor(v, requires_grad=True) for v in a)).item())
            assert abs((vals[0] - vals[1]) / (2 * eps) - grad[idx]) <= 1e-5 * max(1.0, abs(grad[idx])), (which, idx)


@needs_torch
def test_pool_double_backward_matches_torch():
    x0 = RNG.standard_normal((2, 3, 6, 5))

    def run(lib, mod, x):
        y = mod.max_pool2d(x, 3, 2, 1, 1, True)
        z = mod.avg_pool2d(x, 2, 1, 1, True, False)
        gx, = lib.autograd.grad((y * y * y).sum() + (z * z * z).sum(), [x], create_graph=True)
        (gx * gx).sum().backward()
        return x.grad.numpy()
    np.testing.assert_allclose(run(dj, F, dj.tensor(x0, requires_grad=True)),
                               run(torch, TF, torch.tensor(x0, requires_grad=True)), rtol=1e-10, atol=1e-12)


def test_avg_pool2d_negative_divisor_override_divides_by_it():
    # PyTorch divides each window's sum by divisor_override as given, negative ones included
    x = dj.arange(16.0).reshape(1, 1, 4, 4)
    got = dj.nn.functional.avg_pool2d(x, 2, divisor_override=-2)
    assert got.tolist() == [[[[-5.0, -9.0], [-21.0, -25.0]]]]


def test_integer_convolution_and_pooling_as_torch():
    # PyTorch 2.13's CPU kernels take integer input: convolution in wrapping integer arithmetic,
    # max_pool2d compared in the input's dtype, avg_pool2d (int64) dividing the sum truncating
    x = dj.tensor([[[[-7, 2, 5], [3, -1, 0], [4, 4, -9]]]])
    w = dj.tensor([[[[1, -2], [3, 1]]]])
    got = F.conv2d(x, w, dj.tensor([10]))
    assert got.dtype == dj.int64 and got.tolist() == [[[[10 - 7 - 4 + 9 - 1, 10 + 2 - 10 - 3 + 0],
                                                          [10 + 3 + 2 + 12 + 4, 10 - 1 + 0 + 12 - 9]]]]
    i8 = F.conv1d(dj.tensor([[[100, 100]]], dtype=dj.int8), dj.tensor([[[1, 1]]], dtype=dj.int8))
    assert i8.dtype == dj.int8 and i8.tolist() == [[[-56]]]  # 200 wraps, as int8 arithmetic does
    big = dj.tensor([[[[2 ** 62 + 1, 2 ** 62, -2 ** 63, 3]]]])  # unequal, though equal in float64
    vals, idx = F.max_pool2d(big, (1, 2), return_indices=True)
    assert vals.tolist() == [[[[2 ** 62 + 1, 3]]]] and idx.tolist() == [[[[0, 3]]]]
    assert F.max_pool2d(x.to(dj.int16), 2, 1).tolist() == [[[[3, 5], [4, 4]]]]
    assert F.avg_pool2d(x, 2, 1).tolist() == [[[[-3 // 4 + 1, 6 // 4], [10 // 4, -6 // 4 + 1]]]]  # truncated
    assert F.avg_pool1d(dj.tensor([[-1, -2, -4, 3, 5]]), 3, padding=1).tolist() == [[-1, 1]]
    compiled = dj.compile(lambda a, b: F.avg_pool2d(F.conv2d(a, b, padding=1), 2) + F.max_pool2d(a, 2))
    assert compiled(x, w).tolist() == (F.avg_pool2d(F.conv2d(x, w, padding=1), 2) + F.max_pool2d(x, 2)).tolist()
    torch = pytest.importorskip("torch")
    tx, tw = torch.tensor(x.tolist()), torch.tensor(w.tolist())
    assert F.conv2d(x, w, stride=2, padding=1).tolist() == torch.nn.functional.conv2d(tx, tw, stride=2,
                                                                                      padding=1).tolist()
    for args in ((2, 1), (3, 2, 1), (2, 1, 1, True, False), (2, 1, 0, False, True, -3)):
        assert F.avg_pool2d(x, *args).tolist() == torch.nn.functional.avg_pool2d(tx, *args).tolist(), args
