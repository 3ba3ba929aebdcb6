"""dj.nn.functional against PyTorch (values and gradients) when it is installed, against NumPy and
finite differences otherwise; error cases; compiled and lazy results equal eager ones."""

import numpy as np
import pytest

import dispatch_jit as dj
import dispatch_jit.nn.functional as F
from dispatch_jit.errors import DTypeError, InvalidArgumentError, SchemaError, ShapeError, TargetError

try:
    import torch
    import torch.nn.functional as TF
except ImportError:      # the NumPy / finite-difference checks below still run
    torch = TF = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")
RNG = np.random.default_rng(0)
TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-11, atol=1e-12)}


def _pair(a, requires_grad=True):
    return dj.tensor(a, requires_grad=requires_grad), torch.tensor(a, requires_grad=requires_grad)


def _targets(tshape, nclass, ignore=False):
    t = RNG.integers(0, nclass, tshape)
    if ignore and t.size:
        t.reshape(-1)[:: 3] = -100
    return t


CLASS_CASES = [((5,), ()), ((6, 4), (6,)), ((3, 4, 2), (3, 2))]


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,tshape", CLASS_CASES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("opts", [{}, {"ignore_index": -100}, {"label_smoothing": 0.2}, {"weight": True},
                                  {"weight": True, "label_smoothing": 0.1, "ignore_index": -100}])
def test_cross_entropy_and_nll_loss_match_torch(dtype, shape, tshape, reduction, opts):
    nclass = shape[0] if len(shape) == 1 else shape[1]
    x = RNG.standard_normal(shape).astype(dtype)
    t = _targets(tshape, nclass, ignore="ignore_index" in opts)
    w = RNG.uniform(0.5, 2.0, nclass).astype(dtype) if opts.get("weight") else None
    kw = {k: v for k, v in opts.items() if k != "weight"}
    for ours_fn, theirs_fn, pre in ((F.cross_entropy, TF.cross_entropy, None),
                                    (F.nll_loss, TF.nll_loss, 0 if len(shape) == 1 else 1)):
        if pre is not None and "label_smoothing" in kw:
            continue
        xd, xt = _pair(x)
        ind, int_ = (F.log_softmax(xd, pre), TF.log_softmax(xt, pre)) if pre is not None else (xd, xt)
        ours = ours_fn(ind, dj.tensor(t), None if w is None else dj.tensor(w), reduction=reduction, **kw)
        theirs = theirs_fn(int_, torch.tensor(t), None if w is None else torch.tensor(w), reduction=reduction, **kw)
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), **TOL[dtype])
        seed = RNG.uniform(0.5, 1.5, tuple(theirs.shape)).astype(dtype)
        ours.backward(dj.tensor(seed))
        theirs.backward(torch.tensor(seed))
        np.testing.assert_allclose(xd.grad.numpy(), xt.grad.numpy(), **TOL[dtype])


@needs_torch
@pytest.mark.parametrize("shape", [(3000, 3), (3, 5000), (0, 4)])
def test_cross_entropy_in_blocks_of_rows_matches_torch(shape):
    """The fused kernels work through bounded blocks of rows (many short rows, rows longer than a
    block, none): the values and gradients of the whole input, as torch's."""
    x = RNG.standard_normal(shape).astype(np.float32) * 4
    t = _targets(shape[:1], shape[1], ignore=True)
    xd, xt = _pair(x)
    ours = F.cross_entropy(xd, dj.tensor(t), reduction="sum", label_smoothing=0.1)
    theirs = TF.cross_entropy(xt, torch.tensor(t), reduction="sum", label_smoothing=0.1)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=2e-5, atol=1e-4)
    ours.backward()
    theirs.backward()
    np.testing.assert_allclose(xd.grad.numpy(), xt.grad.numpy(), **TOL[np.float32])


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cross_entropy_extreme_logits_match_torch(dtype):
    """Rows whose exp(x - max) underflow (gaps past 708), infinities and NaN: the fused kernel's
    polynomial exp clamps where libm's exp would, and the values and gradients stay torch's."""
    x = np.array([[0.0, -800.0, 5.0], [1e4, -1e4, 0.0], [-np.inf, 0.0, 1.0], [np.nan, 1.0, 2.0],
                  [3.0, 3.0, 3.0], [-50.0, -60.0, -70.0]], dtype)
    t = np.array([1, 0, 2, 1, 0, 2])
    for reduction in ("none", "sum"):
        xd, xt = _pair(x)
        ours = F.cross_entropy(xd, dj.tensor(t), reduction=reduction)
        theirs = TF.cross_entropy(xt, torch.tensor(t), reduction=reduction)
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), **TOL[dtype])
        ours.backward(dj.ones_like(ours))
        theirs.backward(torch.ones_like(theirs))
        np.testing.assert_allclose(xd.grad.numpy(), xt.grad.numpy(), **TOL[dtype])


@needs_torch
@pytest.mark.parametrize("opts", [{}, {"label_smoothing": 0.3}, {"weight": True}, {"reduction": "none"},
                                  {"reduction": "sum", "weight": True, "label_smoothing": 0.1}])
def test_cross_entropy_with_probabilities_matches_torch(opts):
    x = RNG.standard_normal((4, 3, 2))
    p = RNG.uniform(0.1, 1.0, (4, 3, 2))
    p /= p.sum(1, keepdims=True)
    w = RNG.uniform(0.5, 2.0, 3) if opts.get("weight") else None
    kw = {k: v for k, v in opts.items() if k != "weight"}
    xd, xt = _pair(x)
    ours = F.cross_entropy(xd, dj.tensor(p), None if w is None else dj.tensor(w), **kw)
    theirs = TF.cross_entropy(xt, torch.tensor(p), None if w is None else torch.tensor(w), **kw)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-10)
    ours.sum().backward()
    theirs.sum().backward()
    np.testing.assert_allclose(xd.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_cross_entropy_against_numpy_and_finite_differences():
    x = RNG.standard_normal((5, 4))
    t = np.array([0, 3, 1, -100, 2])
    xd = dj.tensor(x, requires_grad=True)
    loss = F.cross_entropy(xd, dj.tensor(t), label_smoothing=0.1)
    logp = x - x.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    valid = t != -100
    rows = 0.9 * -logp[valid, t[valid]] + 0.1 / 4 * -logp[valid].sum(1)
    np.testing.assert_allclose(loss.item(), rows.sum() / valid.sum(), rtol=1e-12)
    tt = dj.tensor(t)
    for red in ("mean", "none"):
        assert dj.autograd.gradcheck(lambda a: F.cross_entropy(a, tt, reduction=red, label_smoothing=0.1), (xd,))
        assert dj.autograd.gradcheck(lambda a: F.nll_loss(F.log_softmax(a, 1), tt, reduction=red), (xd,))


def test_double_backward_through_the_losses():
    x = dj.tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    t = dj.tensor([1, 0, 3])
    for fn in (lambda a: F.cross_entropy(a, t, label_smoothing=0.2), lambda a: F.softmax(a, 1)[:, 0].sum(),
               lambda a: F.log_softmax(a, 1)[:, 1].sum()):
        assert dj.autograd.gradgradcheck(fn, (x,)) if hasattr(dj.autograd, "gradgradcheck") else True
        g, = dj.autograd.grad(fn(x), x, create_graph=True)
        (g * g).sum().backward()
        assert x.grad is not None and np.all(np.isfinite(x.grad.numpy()))
        x.grad = None
    if torch is not None:
        xt = torch.tensor(x.detach().numpy(), requires_grad=True)
        g, = torch.autograd.grad(TF.cross_entropy(xt, torch.tensor([1, 0, 3]), label_smoothing=0.2), xt,
                                 create_graph=True)
        (g * g).sum().backward()
        gd, = dj.autograd.grad(F.cross_entropy(x, t, label_smoothing=0.2), x, create_graph=True)
        (gd * gd).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-12)


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_and_log_softmax_match_torch(dtype, dim):
    x = RNG.standard_normal((3, 4, 5)).astype(dtype)
    for ours_fn, theirs_fn in ((F.softmax, TF.softmax), (F.log_softmax, TF.log_softmax)):
        xd, xt = _pair(x)
        ours, theirs = ours_fn(xd, dim=dim), theirs_fn(xt, dim=dim)
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), **TOL[dtype])
        seed = RNG.standard_normal(x.shape).astype(dtype)
        ours.backward(dj.tensor(seed))
        theirs.backward(torch.tensor(seed))
        np.testing.assert_allclose(xd.grad.numpy(), xt.grad.numpy(), **TOL[dtype])


@needs_torch
@pytest.mark.parametrize("shape", [(3000, 3), (3, 5000)])
def test_softmax_in_blocks_of_rows_matches_torch(shape):
    """softmax and log_softmax (forward and backward) through bounded blocks of rows: many short
    rows, and rows longer than a block."""
    x = RNG.standard_normal(shape).astype(np.float32) * 4
    seed = RNG.uniform(0.5, 1.5, shape).astype(np.float32)
    for ours_fn, theirs_fn in ((F.softmax, TF.softmax), (F.log_softmax, TF.log_softmax)):
        xd, xt = _pair(x)
        ours, theirs = ours_fn(xd, 1), theirs_fn(xt, 1)
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), **TOL[np.float32])
        ours.backward(dj.tensor(seed))
        theirs.backward(torch.tensor(seed))
        np.testing.assert_allclose(xd.grad.numpy(), xt.grad.numpy(), **TOL[np.float32])


@pytest.mark.parametrize("shape", [(300, 32), (21, 400)])
def test_softmax_row_kernel_across_rows_gives_the_row_by_row_bits(shape):
    """softmax / log_softmax's CPU kernel on short rows holds each block of rows column by column
    so that its loops run across rows (they vectorize); every row must still get the bits of one
    row at a time, block remainders and special rows (NaN, all -inf, +inf, -0 beside 0) included."""
    import importlib
    nn_cpu = importlib.import_module("dispatch_jit.kernels.nn.cpu")
    for dtype in (np.float32, np.float64):
        x = (RNG.standard_normal(shape) * 6).astype(dtype)
        x[0, 3] = np.nan
        x[1, :] = -np.inf
        x[2, 5] = np.inf
        x[3, :] = -1.0
        x[3, 0], x[3, 7] = -0.0, 0.0
        x[4, :] = 1e30 if dtype == np.float32 else 1e300
        n, c = shape
        assert nn_cpu._BLOCK // c >= nn_cpu._MIN_COLUMNS      # the kernel takes the column path
        for log in (False, True):
            ours, rowwise = np.empty_like(x), np.empty_like(x)
            nn_cpu._softmax_rows(x, ours, log)
            nn_cpu._softmax_by_row(x, rowwise, log, 0, n, np.empty(n), np.empty(n * c))
            np.testing.assert_array_equal(ours.view(np.uint8), rowwise.view(np.uint8))


def _sum8(a):
    """rows32.sum8's order over the last axis: 8 lanes folded pairwise, then the tail."""
    a = a.astype(np.float64)
    c = a.shape[-1]
    cl = c - c % 8
    lanes = [np.zeros(a.shape[:-1]) for _ in range(8)]
    for j in range(0, cl, 8):
        for u in range(8):
            lanes[u] = lanes[u] + a[..., j + u]
    s = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]))
    for j in range(cl, c):
        s = s + a[..., j]
    return s


@pytest.mark.parametrize("c", [32, 13])
@pytest.mark.parametrize("seed", range(3))
def test_float32_softmax_rows_take_exp_in_float32_as_documented(c, seed):
    """float32 softmax / log_softmax (kernels/nn/rows32.py): x - max rounded in float32, the
    elementwise float32 exp (the same compiled helper as dj.exp), an 8-lane float64 sum, one
    rounding at the end; a causal mask's -inf gives exactly 0, results in exp's subnormal range
    are kept, and NaN, all -inf and +inf rows are NaN, as PyTorch's."""
    x = (np.random.default_rng(seed).standard_normal((40, c)) * 5).astype(np.float32)
    x[np.triu(np.ones((40, c), bool), 1)] = -np.inf
    x[5, 0], x[5, 1] = 40.0, -55.0                # exp(-95): a subnormal float32
    x[6, 2] = np.nan
    x[7, :] = -np.inf
    x[8, 3] = np.inf
    m = x.max(axis=1, keepdims=True)                # NumPy's max: NaN wins, as the kernel's NaN row does
    d = x - m
    e = dj.exp(dj.tensor(d)).numpy()
    s = _sum8(e)[:, None]
    soft = (e.astype(np.float64) * (1.0 / s)).astype(np.float32)
    logs = ((x.astype(np.float64) - m.astype(np.float64)) - np.log(s)).astype(np.float32)
    ours = F.softmax(dj.tensor(x), dim=1).numpy()
    np.testing.assert_array_equal(ours.view(np.uint32), soft.view(np.uint32))
    np.testing.assert_array_equal(F.log_softmax(dj.tensor(x), dim=1).numpy().view(np.uint32), logs.view(np.uint32))
    assert (ours[np.triu(np.ones((40, c), bool), 1)][:50] == 0).all()
    assert 0 < ours[5, 1] < np.finfo(np.float32).tiny
    assert np.isnan(ours[6:9]).all() and not np.isnan(ours[9:]).any()


def test_softmax_edge_cases():
    assert F.softmax(dj.tensor(3.0), dim=0).item() == 1.0
    assert F.log_softmax(dj.tensor([[1.0, 2.0]]), dim=0).numpy().tolist() == [[0.0, 0.0]]
    assert F.softmax(dj.zeros(0, 3), dim=1).shape == (0, 3)
    h = F.softmax(dj.tensor([1.0, 2.0], dtype=dj.float16), dim=0)
    assert h.dtype == dj.float16
    np.testing.assert_allclose(h.numpy().astype(np.float64), [0.2689, 0.7311], atol=1e-3)
    assert F.softmax(dj.tensor([1, 2]), dim=0, dtype=dj.float64).dtype == dj.float64
    assert np.isnan(F.softmax(dj.tensor([np.nan, 1.0]), dim=0).numpy()).all()
    with pytest.warns(UserWarning, match="Implicit dimension"):
        F.softmax(dj.ones(2, 3))
    with pytest.raises(DTypeError, match="softmax"):
        F.softmax(dj.tensor([1, 2]), dim=0)


@needs_torch
def test_regression_losses_and_activations_match_torch():
    x, y = RNG.standard_normal((4, 3)), RNG.uniform(0, 1, (4, 3))
    pw, w = RNG.uniform(0.5, 2, 3), RNG.uniform(0.5, 2, (4, 3))
    cases = [
        (lambda a, b: F.mse_loss(a, b), lambda a, b: TF.mse_loss(a, b)),
        (lambda a, b: F.l1_loss(a, b, reduction="sum"), lambda a, b: TF.l1_loss(a, b, reduction="sum")),
        (lambda a, b: F.binary_cross_entropy_with_logits(a, b), TF.binary_cross_entropy_with_logits),
        (lambda a, b: F.binary_cross_entropy_with_logits(a, b, dj.tensor(w), pos_weight=dj.tensor(pw)),
         lambda a, b: TF.binary_cross_entropy_with_logits(a, b, torch.tensor(w), pos_weight=torch.tensor(pw))),
        (lambda a, b: F.gelu(a, approximate="tanh") * b, lambda a, b: TF.gelu(a, approximate="tanh") * b),
        (lambda a, b: F.silu(a) * b, lambda a, b: TF.silu(a) * b),
        (lambda a, b: F.relu(a) * b, lambda a, b: TF.relu(a) * b),
        (lambda a, b: F.layer_norm(a, (3,), b[0], b[1]), lambda a, b: TF.layer_norm(a, (3,), b[0], b[1])),
        (lambda a, b: F.linear(a, b[:2], b[3, :2]), lambda a, b: TF.linear(a, b[:2], b[3, :2])),
    ]
    for ours_fn, theirs_fn in cases:
        (xd, xt), (yd, yt) = _pair(x), _pair(y)
        ours, theirs = ours_fn(xd, yd), theirs_fn(xt, yt)
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-10, atol=1e-12)
        ours.sum().backward()
        theirs.sum().backward()
        np.testing.assert_allclose(xd.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(yd.grad.numpy(), yt.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_linear_is_one_op_matching_its_decomposition():
    x, w, b = (dj.tensor(RNG.standard_normal(s).astype(np.float32), requires_grad=True) for s in ((2, 3, 4), (5, 4), (5,)))
    y = F.linear(x, w, b)
    assert repr(y.grad_fn) == "<LinearBackward>" and y.shape == (2, 3, 5)
    ref = dj.matmul(x.detach(), dj.transpose(w.detach(), 0, 1)) + b.detach()
    # one product over the flattened batch, where matmul multiplies batch by batch: BLAS may block the sums
    # differently; a 2-D input gives the decomposition's bits
    np.testing.assert_allclose(y.detach().numpy(), ref.numpy(), rtol=1e-6, atol=1e-6)
    x2 = x.detach()[0]
    assert np.array_equal(F.linear(x2, w, b).detach().numpy(),
                          (dj.matmul(x2, dj.transpose(w.detach(), 0, 1)) + b.detach()).numpy())
    assert dj.autograd.gradcheck(lambda a, c, d: F.linear(a, c, d), tuple(t.detach().double().requires_grad_()
                                                                           for t in (x, w, b)))
    with pytest.raises(ShapeError, match="linear"):
        F.linear(x, dj.ones(5, 3))
    with pytest.raises(ShapeError, match="linear: bias"):
        F.linear(x, w, dj.ones(4))


def test_linear_bias_gradient_is_the_float64_column_sum():
    """linear_backward's bias gradient: each column summed in float64, in row order, rounded once
    (contiguous, 3-D and expanded gradients)."""
    def column_sums(g2):
        acc = np.zeros(g2.shape[1])
        for row in g2.astype(np.float64):       # in row order, as the kernel adds
            acc += row
        return acc.astype(np.float32)

    for xs, gs in (((700, 5), (700, 3)), ((4, 9, 5), (4, 9, 3))):
        x = dj.tensor(RNG.standard_normal(xs).astype(np.float32))
        w = dj.tensor(RNG.standard_normal((3, 5)).astype(np.float32))
        g = (RNG.standard_normal(gs) * 1e3).astype(np.float32)
        for gd, ga in ((dj.tensor(g), g), (dj.tensor(g[..., :1]).expand(*gs), np.broadcast_to(g[..., :1], gs))):
            gb = dj.ops.aten.linear_backward(gd, x, w, (False, False, True))[2]
            assert gb.dtype == dj.float32
            assert np.array_equal(gb.numpy(), column_sums(ga.reshape(-1, 3)))


def test_one_hot_dropout_embedding():
    assert F.one_hot(dj.tensor([[0, 2]])).numpy().tolist() == [[[1, 0, 0], [0, 0, 1]]]
    assert F.one_hot(dj.tensor([1]), 4).dtype == dj.int64
    with pytest.raises(ShapeError, match="num_classes"):
        F.one_hot(dj.tensor([5]), 3)
    with pytest.raises(DTypeError, match="one_hot"):
        F.one_hot(dj.tensor([1.0]))
    x = dj.ones(1000, requires_grad=True)
    dj.manual_seed(3)
    a = F.dropout(x, 0.25)
    dj.manual_seed(3)
    b = F.dropout(x, 0.25)
    g = dj.Generator(3)
    c = F.dropout(x, 0.25, generator=g)
    assert np.array_equal(a.detach().numpy(), b.detach().numpy()) and np.array_equal(a.detach().numpy(), c.detach().numpy())
    kept = a.detach().numpy() != 0
    assert 0.65 < kept.mean() < 0.85 and np.allclose(a.detach().numpy()[kept], 1 / 0.75)
    a.sum().backward()
    assert np.array_equal(x.grad.numpy(), a.detach().numpy())
    assert F.dropout(x, 0.5, training=False) is x
    w = dj.tensor(RNG.standard_normal((4, 2)), requires_grad=True)
    e = F.embedding(dj.tensor([[1, 0], [1, 3]]), w, padding_idx=1)
    assert e.shape == (2, 2, 2)
    e.sum().backward()
    assert w.grad.numpy().tolist() == [[1.0, 1.0], [0.0, 0.0], [0.0, 0.0], [1.0, 1.0]]



@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
def test_a_bad_target_raises_when_only_the_backward_runs(loss):
    """Found by the lazyopt helper: in compiled mode a loss nobody holds after ``backward()`` is dead
    code, so only its backward op ran, and that loop indexed rows by the unchecked target (an
    out-of-bounds write).  The backward ops check the targets as the forward ops do, on the CPU
    kernels and the decomposition CUDA uses."""
    x = dj.randn(4, 3, requires_grad=True)
    t = dj.tensor([0, 1, 5, 2])
    f = getattr(F, loss)
    with pytest.raises(TargetError, match=f"{loss}: Target 5 is out of bounds"):
        with dj.execution_mode("compiled"):
            f(x, t).backward()
            x.grad.numpy()
    backward = getattr(dj.ops.aten, "cross_entropy_loss_backward" if loss == "cross_entropy" else "nll_loss_backward")
    with pytest.raises(TargetError, match="Target 5"):
        backward(dj.ones(()), x.detach(), t)
    from dispatch_jit.kernels.nn import decomp
    with pytest.raises(TargetError, match="Target 5"):
        decomp.loss_backward(dj.ones(()), x.detach(), t, None, "mean", -100, 0.0, loss == "cross_entropy")

def test_loss_errors_name_the_function_and_the_fix():
    x = dj.randn(4, 3)
    with pytest.raises(TargetError, match=r"cross_entropy: Target 3 is out of bounds.*\[0, 3\)"):
        F.cross_entropy(x, dj.tensor([0, 1, 3, 2]))
    with pytest.raises(TargetError, match="nll_loss: Target -1"):
        F.nll_loss(x, dj.tensor([0, -1, 1, 2]))
    with pytest.raises(DTypeError, match="integer dtype.*float32.*probabilities"):
        F.cross_entropy(x, dj.tensor([0.0, 1.0, 1.0, 2.0]))
    with pytest.raises(DTypeError, match="integer dtype"):
        F.cross_entropy(x, dj.tensor([True, False, True, False]))
    with pytest.raises(ShapeError, match=r"target of shape \(4,\)"):
        F.cross_entropy(x, dj.tensor([0, 1]))
    with pytest.raises(ShapeError, match="weight"):
        F.cross_entropy(x, dj.tensor([0, 1, 1, 2]), weight=dj.ones(4))
    with pytest.raises(InvalidArgumentError, match="cross_entropy: avg is not a valid value for reduction"):
        F.cross_entropy(x, dj.tensor([0, 1, 1, 2]), reduction="avg")
    with pytest.raises(DTypeError, match="cross_entropy"):
        F.cross_entropy(dj.tensor([[1, 2]]), dj.tensor([0]))
    # every target ignored: the mean is 0 / 0, as PyTorch's
    assert np.isnan(F.cross_entropy(x, dj.tensor([-100] * 4)).item())


def _mlp_loss(x, t, w1, b1, w2, b2):
    return F.cross_entropy(F.linear(F.tanh(F.linear(x, w1, b1)), w2, b2), t, label_smoothing=0.1)


def test_compiled_and_lazy_losses_and_gradients_equal_eager():
    x, t = dj.tensor(RNG.standard_normal((6, 4)).astype(np.float32)), dj.tensor(RNG.integers(0, 3, 6))
    shapes = ((5, 4), (5,), (3, 5), (3,))
    base = [RNG.standard_normal(s).astype(np.float32) for s in shapes]

    def run(fn):
        ps = [dj.tensor(a, requires_grad=True) for a in base]
        loss = fn(x, t, *ps)
        loss.backward()
        return [loss.detach().numpy()] + [p.grad.numpy() for p in ps]

    eager = run(_mlp_loss)
    f = dj.compile(_mlp_loss)
    compiled = run(f)
    assert "eager step aten::cross_entropy_loss" in f.explain()      # traced (Meta kernel), not aborted
    with dj.execution_mode("compiled"):
        lazy = run(_mlp_loss)
    for a, b, c in zip(eager, compiled, lazy):
        assert np.array_equal(a, b) and np.array_equal(a, c)
    with pytest.raises(TargetError):       # a bad target in a compiled call is the eager error
        f(x, dj.tensor([0, 1, 2, 9, 0, 1]), *[dj.tensor(a) for a in base])


@pytest.mark.skipif(not dj.cuda.is_available(), reason="no CUDA device and no simulator")
def test_cuda_runs_the_decompositions():
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    t = np.array([0, 3, -100])
    w, b = RNG.standard_normal((2, 4)).astype(np.float32), RNG.standard_normal(2).astype(np.float32)
    xc = dj.tensor(x, device="cuda", requires_grad=True)
    loss = F.cross_entropy(xc, dj.tensor(t, device="cuda"), label_smoothing=0.1)
    xh = dj.tensor(x, requires_grad=True)
    ref = F.cross_entropy(xh, dj.tensor(t), label_smoothing=0.1)
    np.testing.assert_allclose(loss.cpu().item(), ref.item(), rtol=1e-5)
    loss.backward()
    ref.backward()
    np.testing.assert_allclose(xc.grad.numpy(), xh.grad.numpy(), rtol=1e-5, atol=1e-6)
    y = F.linear(dj.tensor(x, device="cuda"), dj.tensor(w, device="cuda"), dj.tensor(b, device="cuda"))
    np.testing.assert_allclose(y.numpy(), x @ w.T + b, rtol=1e-5, atol=1e-6)
    s = F.log_softmax(dj.tensor(x, device="cuda"), dim=1)
    np.testing.assert_allclose(s.numpy(), F.log_softmax(dj.tensor(x), dim=1).numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(TargetError, match="Target 7"):
        F.cross_entropy(dj.tensor(x, device="cuda"), dj.tensor([0, 7, 1], device="cuda"))


@pytest.mark.parametrize("index", [-1, -4, 4])
def test_embedding_refuses_an_index_outside_the_rows_in_every_mode(index):
    """A negative index returned a row counted from the end (``weight[input]`` is indexing); PyTorch's
    embedding raises ``IndexError: index out of range in self``, for one past the end too."""
    w = dj.tensor(RNG.standard_normal((4, 2)).astype(np.float32), requires_grad=True)
    idx = dj.tensor([[0, index]])
    if torch is not None:
        with pytest.raises(IndexError, match="index out of range in self"):
            TF.embedding(torch.tensor(idx.numpy()), torch.tensor(w.detach().numpy()))
    f = dj.compile(lambda i, w: F.embedding(i, w).sum())
    with pytest.raises(IndexError, match=f"embedding: index out of range in self: index {index} "):
        F.embedding(idx, w)
    # compiled, embedding is traced as its index_select (the call keyed by sizes), whose check raises
    with pytest.raises(IndexError, match=f"index_select: index out of range in self: index {index} "):
        f(idx, w)
    with pytest.raises(IndexError, match="index out of range"):
        with dj.execution_mode("compiled"):
            F.embedding(dj.tensor([index]) * 1, w).sum().backward()
    assert w.grad is None
    with pytest.raises(SchemaError, match="padding_idx 4 must be within num_embeddings"):
        F.embedding(dj.tensor([0]), w, padding_idx=4)
    assert F.embedding(dj.tensor([3, 0]), w, padding_idx=-1).shape == (2, 2)
