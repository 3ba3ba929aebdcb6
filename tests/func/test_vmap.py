"""dj.func.vmap over the Batched key: results equal the stacked per-example loop."""

import warnings

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.func import vmap

F = dj.nn.functional


def _loop(f, xs, in_dims=0):
    """The reference: f on each example, stacked at 0."""
    B = next(x.shape[d] for x, d in zip(xs, in_dims) if d is not None)
    outs = []
    for i in range(B):
        ex = [x if d is None else dj.tensor(np.take(x.numpy(), i, axis=d)) for x, d in zip(xs, in_dims)]
        outs.append(f(*ex).numpy())
    return np.stack(outs)


X = dj.tensor(np.arange(24, dtype=np.float64).reshape(3, 2, 4) / 7.0)
W = dj.tensor(np.linspace(-1, 1, 20).reshape(4, 5))


CASES = [
    ("pointwise", lambda x, w: (x * 2 + 1).exp().tanh(), (0, None)),
    ("broadcast unbatched", lambda x, w: x + w[0, :4], (0, None)),
    ("sum axis", lambda x, w: x.sum(1), (0, None)),
    ("sum all", lambda x, w: x.sum(), (0, None)),
    ("mean keepdims", lambda x, w: dj.mean(x, [0], True), (0, None)),
    ("softmax", lambda x, w: dj.softmax(x, -1), (0, None)),
    ("log_softmax", lambda x, w: dj.log_softmax(x, 0), (0, None)),
    ("argmax", lambda x, w: dj.argmax(x), (0, None)),
    ("reshape", lambda x, w: x.reshape(4, 2).t(), (0, None)),
    ("permute", lambda x, w: x.permute(1, 0).unsqueeze(0), (0, None)),
    ("matmul", lambda x, w: dj.matmul(x, w), (0, None)),
    ("mm", lambda x, w: dj.mm(x, w), (0, None)),
    ("matmul vec", lambda x, w: dj.matmul(x[0], w), (0, None)),
    ("vec @ unbatched vec", lambda x, w: x[0] @ w[:, 0] + w[:, 1] @ x[1], (0, None)),
    ("linear", lambda x, w: dj.nn.functional.linear(x, w.t()), (0, None)),
    ("cat", lambda x, w: dj.cat([x, x * 2], 1), (0, None)),
    ("stack", lambda x, w: dj.stack([x, x], 0), (0, None)),
    ("where", lambda x, w: dj.where(x > 1, x, -x), (0, None)),
    ("cumsum", lambda x, w: dj.cumsum(x, 1), (0, None)),
    ("expand", lambda x, w: x[0].expand(3, 4), (0, None)),
    ("max min std", lambda x, w: dj.amax(x, [1]) + dj.min(x) + dj.std(x, [0]).sum() + dj.prod(x), (0, None)),
    ("logsumexp var", lambda x, w: dj.logsumexp(x, [0]) * dj.var(x), (0, None)),
    ("gather", lambda x, w: dj.gather(x, 1, dj.tensor([[0, 3], [1, 1]])), (0, None)),
    ("index_select", lambda x, w: dj.index_select(x, 1, dj.tensor([2, 0])), (0, None)),
    ("sort", lambda x, w: dj.sort(x, 0, True)[0] + dj.sort(x, 1)[1], (0, None)),
    ("topk", lambda x, w: dj.topk(x, 2)[0], (0, None)),
    ("flip narrow", lambda x, w: dj.flip(x, [1]).narrow(1, 1, 2), (0, None)),
    ("squeeze flatten", lambda x, w: x.unsqueeze(1).squeeze().flatten(), (0, None)),
    ("transpose", lambda x, w: x.transpose(0, 1), (0, None)),
    ("dot outer", lambda x, w: dj.outer(x[0], x[1]) * dj.dot(x[0], x[1]), (0, None)),
    ("bmm", lambda x, w: dj.bmm(x.unsqueeze(0), x.t().unsqueeze(0)), (0, None)),
    ("matmul batched both", lambda x, w: dj.matmul(x, x.t()), (0, None)),
    ("mse_loss", lambda x, w: F.mse_loss(x, x.flip([0]) * 2), (0, None)),
    ("nll_loss 2d", lambda x, w: F.nll_loss(dj.log_softmax(x, 1), dj.tensor([3, 1])), (0, None)),
    ("cross_entropy sum", lambda x, w: F.cross_entropy(x, dj.tensor([0, 2]), reduction="sum"), (0, None)),
    ("gelu silu clamp", lambda x, w: dj.clamp(F.gelu(x) + F.silu(x), dj.tensor(0.2), dj.tensor(1.5)), (0, None)),
    ("masked_fill", lambda x, w: dj.masked_fill(x, x > 1.0, dj.tensor(0.0)), (0, None)),
    ("tril triu", lambda x, w: dj.tril(x, 1) - dj.triu(x), (0, None)),
    ("roll", lambda x, w: dj.roll(x, [1], [1]) + dj.roll(x, [3]), (0, None)),
    ("argsort take", lambda x, w: dj.argsort(x, 0) + dj.take(x, dj.tensor([[7, 0, 1, 1], [2, 2, 3, 4]])), (0, None)),
    ("take_along_dim", lambda x, w: dj.take_along_dim(x, dj.tensor([[1], [0]]), 1), (0, None)),
]


@pytest.mark.parametrize("name,f,dims", CASES)
def test_vmap_equals_loop(name, f, dims):
    got = vmap(f, in_dims=dims)(X, W)
    want = _loop(f, [X, W], dims)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


def test_batched_weight_in_dims_1_and_out_dims():
    Ws = dj.tensor(np.arange(60.0).reshape(4, 3, 5))       # batch at dim 1
    x = dj.tensor(np.arange(8.0).reshape(2, 4))
    f = lambda x, w: dj.matmul(x, w)                       # noqa: E731
    got = vmap(f, in_dims=(None, 1), out_dims=2)(x, Ws)
    want = np.stack([x.numpy() @ Ws.numpy()[:, i] for i in range(3)], axis=2)
    np.testing.assert_allclose(got.numpy(), want)


def test_nested_in_dims_and_outputs():
    xs = {"a": dj.ones(3, 2), "b": (dj.arange(3.0), dj.tensor(5.0))}
    out = vmap(lambda d: (d["a"] * d["b"][0], d["b"][1]), in_dims=({"a": 0, "b": (0, None)},))(xs)
    np.testing.assert_allclose(out[0].numpy(), np.ones((3, 2)) * np.arange(3.0)[:, None])
    assert out[1].shape == (3,)         # an unbatched output is expanded to the batch


def test_nested_vmap_levels():
    x = dj.tensor(np.arange(6.0).reshape(2, 3))
    y = dj.tensor(np.arange(4.0))
    got = vmap(vmap(lambda a, b: a * b, in_dims=(None, 0)), in_dims=(0, None))(x, y)   # outer product per row
    np.testing.assert_allclose(got.numpy(), x.numpy()[:, None, :] * y.numpy()[None, :, None])
    got = vmap(vmap(lambda a: a.sum()))(x)
    np.testing.assert_allclose(got.numpy(), x.numpy())


def test_chunk_size_equals_whole_batch():
    f = lambda x: (x * x).sum(0)          # noqa: E731
    np.testing.assert_allclose(vmap(f, chunk_size=2)(X).numpy(), vmap(f)(X).numpy())


def test_in_dims_errors_name_the_problem():
    with pytest.raises(ValueError, match="in_dims is not compatible"):
        vmap(lambda a, b: a + b, in_dims=(0,))(X, X)
    with pytest.raises(ValueError, match="same size in the mapped dimension"):
        vmap(lambda a, b: a + b)(X, dj.ones(2, 2, 4))
    with pytest.raises(ValueError, match="in_dim=3"):
        vmap(lambda a: a, in_dims=3)(X)
    with pytest.raises(ValueError, match="non-Tensor"):
        vmap(lambda a, n: a * n, in_dims=(0, 0))(X, 2)
    with pytest.raises(ValueError, match="randomness"):
        vmap(lambda a: a, randomness="sometimes")
    with pytest.raises(ValueError, match="truth value"):
        vmap(lambda a: a if a.sum() > 0 else -a)(X)


def test_randomness_modes():
    x = dj.zeros(4, 3)
    with pytest.raises(ValueError, match="randomness error mode"):
        vmap(lambda a: a + dj.rand(3))(x)
    same = vmap(lambda a: a + dj.rand(3), randomness="same")(x).numpy()
    assert (same == same[0]).all()
    diff = vmap(lambda a: a + dj.rand(3), randomness="different")(x).numpy()
    assert diff.shape == (4, 3) and len({tuple(r) for r in diff}) == 4


def test_library_impl_at_batched_and_fallback_warning():
    lib = dj.Library("vmaptest", "DEF")
    lib.define("twice(Tensor x) -> Tensor")
    lib.impl("twice", lambda x: dj.tensor(x.numpy() * 2), "CPU")
    op = dj.ops.vmaptest.twice
    x = dj.tensor(np.arange(6.0).reshape(3, 2))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r1 = vmap(op)(x)
        r2 = vmap(op)(x)
    msgs = [m for m in w if "batching rule" in str(m.message)]
    assert len(msgs) == 1 and "vmaptest::twice" in str(msgs[0].message)
    assert msgs[0].filename == __file__       # the warning names the user's line
    np.testing.assert_allclose(r1.numpy(), x.numpy() * 2)
    np.testing.assert_allclose(r2.numpy(), x.numpy() * 2)

    calls = []

    def rule(x):        # a Batched kernel: sees the BatchedTensor, computes on its value
        from dispatch_jit.func.batched import unwrap_at, wrap_batched
        calls.append(1)
        value, bdim = unwrap_at(x, x._level)
        return wrap_batched(op(value), bdim, x._level)
    h = lib.impl("twice", rule, "Batched")
    np.testing.assert_allclose(vmap(op)(x).numpy(), x.numpy() * 2)
    assert calls == [1]
    del h


def test_no_fallback_for_the_mlp_ops():
    from dispatch_jit.kernels.batching.core import FALLBACK_WARNED
    saved = set(FALLBACK_WARNED)
    FALLBACK_WARNED.clear()
    x = dj.tensor(np.arange(12.0).reshape(3, 4))
    w = dj.tensor(np.ones((2, 4)))
    f = lambda x: dj.nn.functional.cross_entropy(dj.relu(dj.nn.functional.linear(x, w)), dj.tensor(1))  # noqa
    try:
        vmap(f)(x)
        assert not FALLBACK_WARNED
    finally:
        FALLBACK_WARNED.update(saved)


def test_inplace_on_a_batched_tensor_and_refused_on_an_unbatched_one():
    x = dj.tensor(np.arange(6.0).reshape(3, 2))
    out = vmap(lambda a: a.clone().mul_(2).add_(dj.ones(2)))(x)
    np.testing.assert_allclose(out.numpy(), x.numpy() * 2 + 1)
    with pytest.raises(ValueError, match="out-of-place"):
        vmap(lambda a: dj.ones(2).add_(a))(x)


def test_every_case_has_a_rule():
    """No op of the cases above takes the looping fallback (each has a rule or a decomposition)."""
    from dispatch_jit.kernels.batching.core import FALLBACK_WARNED
    saved = set(FALLBACK_WARNED)
    FALLBACK_WARNED.clear()
    try:
        for name, f, dims in CASES:
            vmap(f, in_dims=dims)(X, W)
        assert not FALLBACK_WARNED
    finally:
        FALLBACK_WARNED.update(saved)


def test_custom_op_register_vmap():
    @dj.library.custom_op("vmaptest::scale3", mutates_args=())
    def scale3(x: dj.Tensor) -> dj.Tensor:
        return dj.tensor(x.numpy() * 3)
    seen = []

    def rule(info, in_dims, x):
        seen.append((info.batch_size, in_dims))
        return scale3(x), in_dims[0]
    try:
        scale3.register_vmap(rule)
        x = dj.tensor(np.arange(6.0).reshape(2, 3))
        out = vmap(scale3, in_dims=1)(x)
        np.testing.assert_allclose(out.numpy(), (x.numpy() * 3).T)
        assert seen == [(3, (1,))]
    finally:
        scale3._destroy()


def test_out_dims_variants_and_errors():
    x = dj.tensor(np.arange(6.0).reshape(3, 2))
    a, b = vmap(lambda r: (r * 2, r.sum()), out_dims=(1, 0))(x)
    np.testing.assert_allclose(a.numpy(), (x.numpy() * 2).T)
    np.testing.assert_allclose(b.numpy(), x.numpy().sum(1))
    c = vmap(lambda r, k: (r + 1, k), in_dims=(0, None), out_dims=(0, None))(x, dj.ones(2))
    assert c[1].shape == (2,)
    with pytest.raises(ValueError, match="out_dims is not compatible"):
        vmap(lambda r: (r, r), out_dims=(0, 0, 0))(x)
    with pytest.raises(ValueError, match="when out_dim is None"):
        vmap(lambda r: r, out_dims=None)(x)
    with pytest.raises(ValueError, match="must only return Tensors"):
        vmap(lambda r: 3)(x)
    with pytest.raises(ValueError, match="chunk_size"):
        vmap(lambda r: r, chunk_size=0)
    with pytest.raises(ValueError, match="cannot be read|no data"):
        vmap(lambda r: r.numpy())(x)


def test_ensemble_linear_with_batched_weights():
    rng = np.random.default_rng(3)
    x = dj.tensor(rng.standard_normal((2, 4)))
    Ws, bs = dj.tensor(rng.standard_normal((3, 5, 4))), dj.tensor(rng.standard_normal((3, 5)))
    got = vmap(F.linear, in_dims=(None, 0, 0))(x, Ws, bs).numpy()
    want = np.stack([x.numpy() @ Ws.numpy()[i].T + bs.numpy()[i] for i in range(3)])
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_weighted_loss_takes_the_fallback_and_equals_the_loop():
    from dispatch_jit.kernels.batching.core import FALLBACK_WARNED
    logits = dj.tensor(np.random.default_rng(4).standard_normal((3, 2, 4)))
    target, weight = dj.tensor([1, 3]), dj.tensor([1.0, 2.0, 0.5, 3.0])
    f = lambda z: F.cross_entropy(z, target, weight=weight)     # noqa: E731
    FALLBACK_WARNED.discard("aten::cross_entropy_loss")
    with pytest.warns(UserWarning, match="aten::cross_entropy_loss"):
        got = vmap(f)(logits)
    np.testing.assert_allclose(got.numpy(), [f(dj.tensor(z)).numpy() for z in logits.numpy()], rtol=1e-12)


def test_batched_key_order_and_signatures():
    K = dj.DispatchKey
    assert K.CPU < K.PrivateUse1 < K.Batched < K.ADInplaceOrView < K.AutogradCPU < K.AutocastCPU
    # Batched sits below autograd, and dense CPU signatures with autograd stay one CPython digit
    assert dj.tensor([1.0], requires_grad=True)._sig < 2 ** 30
    seen = []
    vmap(lambda r: seen.append(dj.dispatch_keys(r)) or r)(dj.ones(2, 2))
    assert seen[0].highest() is K.Batched


IMAGES3 = dj.tensor(np.sin(np.arange(3 * 2 * 5 * 6, dtype=np.float64)).reshape(3, 2, 5, 6))     # B x (C, H, W)
IMAGES4 = dj.tensor(np.cos(np.arange(3 * 2 * 2 * 5 * 6, dtype=np.float64)).reshape(3, 2, 2, 5, 6))  # B x (N, C, H, W)
KERNEL = dj.tensor(np.linspace(-1, 1, 4 * 2 * 3 * 3).reshape(4, 2, 3, 3))


@pytest.mark.parametrize("x", [IMAGES3, IMAGES4], ids=["chw", "nchw"])
@pytest.mark.parametrize("name,f,exact", [
    ("avg_pool2d", lambda t: F.avg_pool2d(t, 2, 1, 1, ceil_mode=True, count_include_pad=True), True),
    ("max_pool2d", lambda t: F.max_pool2d(t, 2), True),
    # the batch joins the convolution's GEMM, whose blocking (so its rounding) depends on its size
    ("conv2d", lambda t: F.conv2d(t, KERNEL, padding=1), False),
])
def test_images_rule_equals_loop_without_the_fallback(x, name, f, exact):
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # the looping fallback warns: it must not run
        got = vmap(f)(x).numpy()
    want = _loop(f, [x], [0])
    assert got.shape == want.shape
    if exact:
        assert np.array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
