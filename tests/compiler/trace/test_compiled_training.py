"""``dj.compile`` of a loss whose captured tensors (a model's parameters) require grad
(compiler/trace/symbolic.py ``lift``, owners.py): the parameters are extra inputs of the traced
graph, the fused backward differentiates with respect to them, and ``.grad`` accumulates
into them as eager mode's does.  Oracle: the same model, built from the same seed, trained
eagerly step for step; gradients and parameters must agree to rounding."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit import nn
from dispatch_jit.compiler.run.cached import EagerEntry, GradEntry
from dispatch_jit.compiler.training.whole_step import StepEntry

F = nn.functional
RNG = np.random.default_rng(0)
X = dj.from_numpy(RNG.standard_normal((32, 6)).astype(np.float32))
Y = dj.from_numpy(RNG.integers(0, 3, 32))
T = dj.from_numpy(RNG.standard_normal((32, 3)).astype(np.float32))


def _mlp(act=nn.Tanh):
    return nn.Sequential(nn.Linear(6, 8), act(), nn.Linear(8, 3))


def _twins(make, seed=0):
    dj.manual_seed(seed)
    a = make()
    dj.manual_seed(seed)
    return a, make()


def _grads(model):
    return [None if p.grad is None else p.grad.numpy().copy() for p in model.parameters()]


def _same(got, want, what):
    for i, (a, b) in enumerate(zip(got, want)):
        assert (a is None) == (b is None), f"{what}: parameter {i}: grad {'None' if a is None else 'set'} compiled"
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6, err_msg=f"{what}: parameter {i}")


def _train(model, loss_fn, opt, data, steps=4):
    """Per step: the loss, the parameters' grads; then the parameters after the last step."""
    out = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(*data)
        loss.backward()
        out.append((loss.item(), _grads(model)))
        opt.step()
    return out, [p.numpy().copy() for p in model.parameters()]


def _compare(make, loss_of, opt_of, data, steps=4):
    cm, em = _twins(make)
    compiled = dj.compile(lambda *a: loss_of(cm, *a))
    got, gp = _train(cm, compiled, opt_of(cm), data, steps)
    want, wp = _train(em, lambda *a: loss_of(em, *a), opt_of(em), data, steps)
    for k, ((lg, gg), (lw, gw)) in enumerate(zip(got, want)):
        np.testing.assert_allclose(lg, lw, rtol=2e-5, err_msg=f"loss at step {k}")
        _same(gg, gw, f"step {k}")
    _same(gp, wp, "parameters after training")
    return compiled, cm


def _fused(cf) -> bool:
    """The last call was compiled, and its backward was the fused plan (not an eager replay)."""
    e = cf._last
    return isinstance(e, GradEntry) and not e.replays and all(not isinstance(f, str) for f in e.fused.values())


def test_mlp_sgd_cross_entropy():
    cf, _ = _compare(_mlp, lambda m, x, y: F.cross_entropy(m(x), y),
                     lambda m: dj.optim.SGD(m.parameters(), lr=0.1, momentum=0.9), (X, Y))
    assert _fused(cf), cf.explain()
    assert cf.cache_info().traces == 1, cf.explain()
    assert "lifted global" not in cf.explain() and "lifted closure variable 'cm'.0.weight" in cf.explain()


def _sq_err(m, x, t):
    d = m(x) - t
    return (d * d).mean()


def test_mlp_adam_relu_squared_error():
    cf, _ = _compare(lambda: _mlp(nn.ReLU), _sq_err, lambda m: dj.optim.Adam(m.parameters(), lr=0.01), (X, T))
    assert _fused(cf), cf.explain()


def test_mse_loss_matches_eager():
    # F.mse_loss compares the input's and the target's shapes in Python (a broadcast warning): that
    # signature runs eagerly, and explain() says why
    cf, _ = _compare(_mlp, lambda m, x, t: F.mse_loss(m(x), t),
                     lambda m: dj.optim.Adam(m.parameters(), lr=0.01), (X, T), steps=2)
    assert _fused(cf) or "shape" in cf.explain()


def test_layer_norm_model_matches_eager():
    # layer_norm reads its input's shape in Python: the signature runs eagerly, explain() says why
    make = lambda: nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.Tanh(), nn.Linear(8, 3))  # noqa: E731
    cf, _ = _compare(make, lambda m, x, y: F.cross_entropy(m(x), y),
                     lambda m: dj.optim.SGD(m.parameters(), lr=0.1), (X, Y), steps=2)
    assert isinstance(cf._last, GradEntry) or "shape" in cf.explain()


def _no_bias_grad():
    m = _mlp()
    m[2].bias.requires_grad_(False)
    return m


def _frozen_first():
    m = _mlp()
    for p in m[0].parameters():
        p.requires_grad_(False)
    return m


@pytest.mark.parametrize("make", [_no_bias_grad, _frozen_first], ids=["no_bias_grad", "frozen_layer"])
def test_parameters_without_grad(make):
    cf, m = _compare(make, lambda m, x, y: F.cross_entropy(m(x), y),
                     lambda m: dj.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=0.1), (X, Y))
    assert _fused(cf), cf.explain()
    assert any(p.grad is None for p in m.parameters())


def test_accumulation_without_zero_grad():
    cm, em = _twins(_mlp)
    cf = dj.compile(lambda x, y: F.cross_entropy(cm(x), y))
    for _ in range(3):
        cf(X, Y).backward()
        F.cross_entropy(em(X), Y).backward()
    _same(_grads(cm), _grads(em), "accumulated grads")
    assert _fused(cf)


def test_parameter_swapped_between_calls():
    cm, em = _twins(_mlp)
    cf = dj.compile(lambda x, y: F.cross_entropy(cm(x), y))
    cf(X, Y).backward()
    old = cm[0].weight
    old_grad = old.grad.numpy().copy()
    for m in (cm, em):
        m[0].weight = nn.Parameter(dj.full((8, 6), 0.05))
    cm.zero_grad(), em.zero_grad()
    loss = cf(X, Y)
    loss.backward()
    want = F.cross_entropy(em(X), Y)
    want.backward()
    np.testing.assert_allclose(loss.item(), want.item(), rtol=1e-6)
    _same(_grads(cm), _grads(em), "after the swap")
    np.testing.assert_array_equal(old.grad.numpy(), old_grad)       # the old tensor got nothing
    assert "0.weight is another tensor now" in cf.explain(), cf.explain()
    assert _fused(cf)


def test_requires_grad_toggled_between_calls():
    cm, em = _twins(_mlp)
    cf = dj.compile(lambda x, y: F.cross_entropy(cm(x), y))
    for step, frozen in enumerate([False, True, True, False]):
        for m in (cm, em):
            m.zero_grad(set_to_none=True)
            m[0].weight.requires_grad_(not frozen)
        cf(X, Y).backward()
        F.cross_entropy(em(X), Y).backward()
        _same(_grads(cm), _grads(em), f"step {step} (first weight frozen: {frozen})")
        assert _fused(cf), cf.explain()
    assert "requires_grad, dtype or layout changed" in cf.explain()


def test_two_losses_share_a_model():
    cm, em = _twins(_mlp)
    ce = dj.compile(lambda x, y: F.cross_entropy(cm(x), y))
    mse = dj.compile(lambda x, t: _sq_err(cm, x, t))
    copt, eopt = dj.optim.SGD(cm.parameters(), lr=0.05), dj.optim.SGD(em.parameters(), lr=0.05)
    for step in range(3):
        copt.zero_grad(), eopt.zero_grad()
        (ce(X, Y) + mse(X, T) * 0.5).backward()
        (F.cross_entropy(em(X), Y) + _sq_err(em, X, T) * 0.5).backward()
        _same(_grads(cm), _grads(em), f"step {step}")
        copt.step(), eopt.step()
    assert _fused(ce) and _fused(mse)


class Affine:
    """A user object: guards follow ``self.w`` (a capture, not a lifted tensor)."""

    def __init__(self):
        self.w = dj.from_numpy(RNG.standard_normal((6, 3)).astype(np.float32)).requires_grad_()

    def __call__(self, x):
        return dj.matmul(x, self.w)


AFF = Affine()
W = dj.from_numpy(RNG.standard_normal((3,)).astype(np.float32)).requires_grad_()
_GUARDED = dj.compile(lambda x, t: ((dj.tanh(AFF(x) + W) - t) ** 2).mean())


def test_guarded_chains_require_grad():
    for step in range(3):
        AFF.w.grad = W.grad = None
        _GUARDED(X, T).backward()
        got = [AFF.w.grad.numpy().copy(), W.grad.numpy().copy()]
        w, b = AFF.w.detach().requires_grad_(), W.detach().requires_grad_()
        F.mse_loss(dj.tanh(dj.matmul(X, w) + b), T).backward()
        _same(got, [w.grad.numpy(), b.grad.numpy()], f"step {step}")
        with dj.no_grad():
            AFF.w.sub_(AFF.w.grad * 0.1)
            W.sub_(W.grad * 0.1)
    assert _fused(_GUARDED), _GUARDED.explain()
    AFF.w = dj.from_numpy(RNG.standard_normal((6, 3)).astype(np.float32))     # no grad now: retraces
    AFF.w.grad = None
    _GUARDED(X, T).backward()
    assert AFF.w.grad is None and W.grad is not None


def test_unguarded_lifted_tensor_runs_eagerly():
    w0 = dj.ones(6, requires_grad=True)

    def f(x, w=w0):          # a default argument value: nothing tells a later call it was rebound
        return (x * w).sum()
    cf = dj.compile(f)
    cf(X).backward()
    assert isinstance(cf._last, EagerEntry) and "no guard watches" in cf._last.reason
    np.testing.assert_allclose(w0.grad.numpy(), X.numpy().sum(0), rtol=1e-5)


def test_inference_under_no_grad_reads_updated_parameters():
    m = _mlp()
    cf = dj.compile(lambda x: m(x))
    with dj.no_grad():
        a = cf(X).numpy().copy()
        m[2].bias.add_(1.0)
        b = cf(X).numpy()
        np.testing.assert_allclose(b, a + 1.0, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(b, m(X).numpy(), rtol=1e-5, atol=1e-6)
    assert cf.cache_info().traces == 1


def _sgd_by_hand(m, x, y):
    F.cross_entropy(m(x), y).backward()
    with dj.no_grad():
        for p in m.parameters():
            p -= 0.1 * p.grad
            p.grad = None


@pytest.mark.parametrize("update", ["opt.step()", "by hand"])
def test_a_whole_step_compiles_as_one(update):
    """A compiled function that calls backward() itself (forward, backward and update in one
    function) is traced again as one step (compiler/training/whole_step.py; test_compiled_step.py covers it):
    it trains as eager mode does (the plan's matmuls may round differently: 1e-6)."""
    cm, em = _twins(_mlp)
    if update == "opt.step()":
        oc, oe = (dj.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01) for m in (cm, em))

        def step_of(m, opt):
            def step(x, y):
                opt.zero_grad()
                loss = F.cross_entropy(m(x), y)
                loss.backward()
                opt.step()
                return loss
            return step
        compiled, eager = dj.compile(step_of(cm, oc)), step_of(em, oe)
    else:
        compiled, eager = dj.compile(lambda x, y: _sgd_by_hand(cm, x, y)), lambda x, y: _sgd_by_hand(em, x, y)
    for _ in range(3):
        compiled(X, Y)
        eager(X, Y)
        for p, q in zip(cm.parameters(), em.parameters()):
            np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-6, atol=1e-7)
            assert (p.grad is None) == (q.grad is None)
    assert isinstance(compiled._last, StepEntry)
    assert "whole step compiled" in compiled.explain(), compiled.explain()
    assert compiled.cache_info().traces == 1
