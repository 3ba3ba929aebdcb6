"""Autograd through ``dj.compile``: outputs of a compiled call whose inputs
require grad give eager mode's gradients (oracle: the same function, eager).

The compiled functions are module-level and shared, so each loop compiles once.
"""

import os

import numpy as np
import pytest

import dispatch_jit as dj


def issue_fn(a, b, c):
    return dj.maximum((a * b + c) * 2.0 - a, 0.0) * dj.exp(-b)


def two_outputs(a, b):
    s = dj.tanh(a) * b
    return {"s": s, "pair": (s * a + 1.0, dj.sigmoid(b - a))}


def with_reduction(a, b):
    h = dj.exp(a * 0.5) * b          # fused
    return (h - h.sum() * 0.1) * a   # an eager reduction between two fused regions


def scaled(a, *, scale):
    return dj.log(a * a + 1.0) * scale


CASES = {
    "issue": (issue_fn, [(3, 4), (4,), (3, 1)], {}),
    "two_outputs": (two_outputs, [(2, 5), (2, 5)], {}),
    "with_reduction": (with_reduction, [(6,), (1,)], {}),
}
COMPILED = {name: dj.compile(fn) for name, (fn, _, _) in CASES.items()}
COMPILED_SCALED = dj.compile(scaled)


@pytest.fixture(autouse=True, scope="module")
def _private_disk_cache(tmp_path_factory):
    """Loops compiled here go to a tmp directory, never the user's ~/.cache (conftest may set one already)."""
    old = os.environ.get("DISPATCH_JIT_CACHE_DIR")
    if old is None:
        os.environ["DISPATCH_JIT_CACHE_DIR"] = str(tmp_path_factory.mktemp("dj_cache"))
    yield
    if old is None:
        os.environ.pop("DISPATCH_JIT_CACHE_DIR", None)


def _leaves(shapes, requires, seed=0):
    rng = np.random.default_rng(seed)
    ts = [dj.from_numpy(rng.standard_normal(s)) for s in shapes]
    return [t.requires_grad_(r) for t, r in zip(ts, requires)]


def _flat(out):
    if isinstance(out, dict):
        return [t for v in out.values() for t in _flat(v)]
    if isinstance(out, (list, tuple)):
        return [t for v in out for t in _flat(v)]
    return [out]


def _loss(out):
    # different weights per output, so a swapped output would show
    return sum(((o * float(k + 1)) * o).sum() for k, o in enumerate(_flat(out)))


def _grads(fn, shapes, requires, **kw):
    ts = _leaves(shapes, requires)
    out = fn(*ts, **kw)
    _loss(out).backward()
    return [o.detach().numpy() for o in _flat(out)], [None if t.grad is None else t.grad.numpy() for t in ts]


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("requires", [(True, True, True), (False, True, False), (True, False, True)])
def test_gradients_equal_eager(name, requires):
    fn, shapes, _ = CASES[name]
    requires = requires[:len(shapes)]
    if not any(requires):
        requires = (True,) + requires[1:]
    out_e, g_e = _grads(fn, shapes, requires)
    out_c, g_c = _grads(COMPILED[name], shapes, requires)
    for x, y in zip(out_e, out_c):
        np.testing.assert_allclose(y, x, rtol=1e-12, atol=1e-12)
    for x, y, r in zip(g_e, g_c, requires):
        assert (x is None) == (y is None) == (not r)
        if r:
            np.testing.assert_allclose(y, x, rtol=1e-10, atol=1e-12)
    assert COMPILED[name].cache_info().eager_calls == 0, COMPILED[name].explain()


def test_grad_fn_node_and_explain():
    a, b, c = _leaves([(3, 4), (4,), (3, 1)], (True, True, False))
    cf = COMPILED["issue"]
    out = cf(a, b, c)
    assert out.requires_grad and type(out.grad_fn).__name__ == "CompiledBackward"
    assert "fused backward" in cf.explain()
    # dj.autograd.grad with an explicit grad_output, and retain_graph for a second backward
    go = dj.from_numpy(np.full((3, 4), 0.5))
    ga, gb = dj.autograd.grad(out, [a, b], go, retain_graph=True)
    ea, eb = dj.autograd.grad(issue_fn(a, b, c), [a, b], go)
    np.testing.assert_allclose(ga.numpy(), ea.numpy())
    np.testing.assert_allclose(gb.numpy(), eb.numpy())
    out.sum().backward()
    assert a.grad is not None and c.grad is None


def test_keyword_tensor_argument():
    a = _leaves([(5,)], (True,))[0]
    out = COMPILED_SCALED(a, scale=2.0)
    out.sum().backward()
    a2 = a.detach().requires_grad_(True)
    scaled(a2, scale=2.0).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), a2.grad.numpy())


def test_no_grad_mode_records_nothing():
    a, b, c = _leaves([(3, 4), (4,), (3, 1)], (True, True, True))
    with dj.no_grad():
        out = COMPILED["issue"](a, b, c)
    assert not out.requires_grad and out.grad_fn is None


def test_returning_an_input_runs_eagerly():
    cf = dj.compile(lambda a, b: (a, a * b))
    a, b = _leaves([(3,), (3,)], (True, True))
    x, y = cf(a, b)
    assert x is a
    (y.sum() + x.sum()).backward()
    np.testing.assert_allclose(a.grad.numpy(), b.detach().numpy() + 1.0)
    assert "returns an input tensor itself" in cf.explain()


def test_global_compiled_mode_gradients():
    fn, shapes, _ = CASES["issue"]
    _, g_e = _grads(fn, shapes, (True, True, False))
    with dj.execution_mode("compiled"):
        _, g_c = _grads(fn, shapes, (True, True, False))
    for x, y in zip(g_e, g_c):
        assert (x is None) == (y is None)
        if x is not None:
            np.testing.assert_allclose(y, x, rtol=1e-12)
