"""The fused backward of ``dj.compile`` (compiler/joint.py, partition.py): the joint forward+backward
graph traced through the derivative table, split by a min-cut, both sides compiled.  Oracle: the same
function, eager (and PyTorch where installed).  The compiled functions are module-level: each loop
compiles once."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.compiler.graph.partition import min_cut


CASES = {
    "broadcast": (lambda a, b: dj.tanh(a * b + 1.0) * a, [(3, 4), (4,)]),
    "reductions": (lambda a, b: (a * b).sum(axis=1) + (a - b).mean(), [(5, 3), (1, 3)]),
    "amax_var_std": (lambda a: dj.amax(dj.exp(a), 0) * a.var(axis=0) + a.std(), [(6, 4)]),
    "matmul": (lambda x, w, b: dj.tanh(dj.matmul(x, w) + b), [(8, 5), (5, 3), (3,)]),
    "views": (lambda a: (a.T * 2.0).reshape(12) * dj.sigmoid(a.reshape(12)), [(3, 4)]),
    "permute_expand": (lambda a, b: a.permute(2, 0, 1) * b.unsqueeze(0).expand(4, 2, 3), [(2, 3, 4), (2, 3)]),
    "used_twice": (lambda a: a * a + dj.sin(a) * a, [(7,)]),
    "logsumexp": (lambda a: a - dj.logsumexp(a, 1, True), [(4, 3)]),
    "narrow_cat": (lambda a, b: dj.cat([dj.narrow(a, 1, 1, 2), b * 2.0], 0).sum(axis=1), [(2, 3), (4, 2)]),
    "where_clamp": (lambda a, b: dj.where(a > 0, dj.clamp(a, -0.5, 0.5) * b, b), [(3, 3), (3, 3)]),
    "pow_div": (lambda a, b: (a * a + 1.0) ** 1.5 / (b * b + 1.0), [(4, 2), (2,)]),
    "relu_gelu": (lambda a: dj.relu(a) * a + dj.gelu(a), [(9,)]),
    "two_outputs": (lambda a, b: (a * b, dj.exp(a).sum()), [(3,), (3,)]),
}
COMPILED = {name: dj.compile(fn) for name, (fn, _) in CASES.items()}


def _inputs(shapes, requires=None, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    requires = requires or [True] * len(shapes)
    return [dj.from_numpy(rng.standard_normal(s).astype(dtype)).requires_grad_(r) for s, r in zip(shapes, requires)]


def _loss(out):
    outs = out if isinstance(out, tuple) else (out,)
    total = None
    for k, o in enumerate(outs):
        term = (o * o * float(k + 1)).sum()
        total = term if total is None else total + term
    return total


def _grads(fn, xs):
    _loss(fn(*xs)).backward()
    return [None if x.grad is None else x.grad.numpy().copy() for x in xs]


def _fused(cf) -> list:
    return [f if isinstance(f, str) else "fused" for f in cf._last.fused.values()]


def _assert_same(got, want, rtol=1e-12):
    for i, (a, b) in enumerate(zip(got, want)):
        assert (a is None) == (b is None), f"input {i}: grad {'None' if a is None else 'set'} compiled"
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol, err_msg=f"input {i}")


@pytest.mark.parametrize("name", CASES)
def test_gradients_equal_eager(name):
    fn, shapes = CASES[name]
    cf = COMPILED[name]
    want = _grads(fn, _inputs(shapes))
    got = _grads(cf, _inputs(shapes))
    _assert_same(got, want)
    assert _fused(cf) == ["fused"], cf.explain()
    assert "fused backward" in cf.explain()


def test_inputs_that_do_not_require_grad_and_int_inputs():
    cf = COMPILED["broadcast"]
    for requires in ([False, True], [True, False]):
        want = _grads(CASES["broadcast"][0], _inputs([(3, 4), (4,)], requires))
        _assert_same(_grads(cf, _inputs([(3, 4), (4,)], requires)), want)
    f = dj.compile(lambda a, k: dj.exp(a * k) + k)
    a = _inputs([(5,)])[0]
    k = dj.tensor([1, 2, 3, 4, 5], dtype=dj.int64)
    f(a, k).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), (np.exp(a.detach().numpy() * k.numpy()) * k.numpy()), rtol=1e-12)
    assert k.grad is None and _fused(f) == ["fused"]


def test_float32_input_in_a_float64_computation_gets_a_float32_grad():
    f = dj.compile(lambda a, b: dj.exp(a * b))
    a = dj.from_numpy(np.linspace(-1, 1, 6).astype(np.float32)).requires_grad_(True)
    b = dj.from_numpy(np.linspace(0, 1, 6)).requires_grad_(True)
    f(a, b).sum().backward()
    ea, eb = a.detach().requires_grad_(True), b.detach().requires_grad_(True)
    dj.exp(ea * eb).sum().backward()
    assert a.grad.dtype == dj.float32 and b.grad.dtype == dj.float64
    _assert_same([a.grad.numpy(), b.grad.numpy()], [ea.grad.numpy(), eb.grad.numpy()])


def test_sizes_across_the_parallel_threshold_and_a_new_size():
    fn, cf = CASES["broadcast"][0], COMPILED["broadcast"]
    for shapes in ([(600, 512), (512,)], [(5, 7), (7,)]):       # 307200 elements: the parallel loops
        xs = _inputs(shapes, dtype=np.float32)
        want = _grads(fn, _inputs(shapes, dtype=np.float32))
        _assert_same(_grads(cf, xs), want, rtol=2e-5)
    assert len(cf._last.fused) >= 2 and all(f == "fused" for f in _fused(cf))


def test_unused_output_and_one_output_in_the_loss():
    fn, cf = CASES["two_outputs"]
    for pick in (0, 1):
        xs, ys = _inputs([(3,), (3,)]), _inputs([(3,), (3,)])
        fn(*xs)[pick].sum().backward()
        COMPILED["two_outputs"](*ys)[pick].sum().backward()
        _assert_same([y.grad.numpy() if y.grad is not None else None for y in ys],
                     [x.grad.numpy() if x.grad is not None else None for x in xs])


def test_retain_graph_and_backward_twice():
    xs = _inputs([(8, 5), (5, 3), (3,)])
    out = COMPILED["matmul"](*xs)
    loss = _loss(out)
    loss.backward(retain_graph=True)
    first = [x.grad.numpy().copy() for x in xs]
    loss.backward()
    _assert_same([x.grad.numpy() for x in xs], [2 * g for g in first])
    out2 = COMPILED["matmul"](*xs)
    loss2 = _loss(out2)
    loss2.backward()
    with pytest.raises(dj.errors.AutogradError):
        loss2.backward()


def test_a_saved_output_modified_in_place_is_caught():
    f = dj.compile(lambda a: dj.exp(a) * 2.0 + dj.exp(a))     # exp's backward reads its result
    a = _inputs([(4,)])[0]
    out = f(a)
    with dj.no_grad():
        out.add_(1.0)
    g = out.sum()
    try:
        g.backward()
    except dj.errors.AutogradError:
        return
    np.testing.assert_allclose(a.grad.numpy(), 3 * np.exp(a.detach().numpy()), rtol=1e-12)


def test_double_backward_replays_eagerly_and_says_so():
    f = dj.compile(lambda x: x * x * x)
    x = dj.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (g,) = dj.autograd.grad(f(x).sum(), x, create_graph=True)
    g.sum().backward()
    np.testing.assert_allclose(g.detach().numpy(), [3.0, 12.0, 27.0])
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 12.0, 18.0])
    assert "create_graph=True" in f.explain()


@pytest.mark.parametrize("fn, why", [
    (lambda a: a.prod(axis=0) * 2.0, "Tensor.item() reads data"),
    (lambda a: a[1:] * 2.0, "basic indexing"),
])
def test_untraceable_backward_falls_back_and_explains(fn, why):
    cf = dj.compile(fn)
    want = _grads(fn, _inputs([(4, 3)]))
    _assert_same(_grads(cf, _inputs([(4, 3)])), want)
    assert why in cf.explain()


def test_a_runtime_scalar_reaches_the_backward_as_a_parameter():
    f = dj.compile(lambda a, k: dj.exp(a * k) * k)
    for k in (0.5, 2.0):
        a = _inputs([(4,)])[0]
        f(a, k).sum().backward()
        x = a.detach().numpy()
        np.testing.assert_allclose(a.grad.numpy(), np.exp(x * k) * k * k, rtol=1e-12)
    assert _fused(f) == ["fused"]
    p = dj.compile(lambda a, k: (a * a + 1.0) ** k)     # pow's formula computes k - 1 in Python
    for k in (1.5, 3.0):
        a = _inputs([(4,)])[0]
        p(a, k).sum().backward()
        x = a.detach().numpy()
        np.testing.assert_allclose(a.grad.numpy(), k * (x * x + 1) ** (k - 1) * 2 * x, rtol=1e-12)
    assert "runtime scalar" in p.explain()


def test_min_cut_saves_the_cheaper_side():
    inf = float("inf")
    # a -> b -> c -> sink, with b's edge the cheapest: the cut crosses it
    edges = {("source", "a"): inf, ("a", "b"): 5, ("b", "c"): 2, ("c", "sink"): 7}
    assert min_cut(edges, "source", "sink") == {"source", "a", "b"}


def test_partition_recomputes_elementwise_and_saves_matmul():
    f = dj.compile(lambda x, w: dj.tanh(dj.matmul(x, w)) * 3.0)
    xs = _inputs([(16, 8), (8, 4)])
    _loss(f(*xs)).backward()
    fg = next(iter(f._last.fused.values()))
    # the matmul's result is never recomputed: tanh's result (what its formula reads) is saved
    assert ("extra", 0) in fg.saved
    mm_fwd = [n for n in fg.split.forward.nodes if n.name == "aten::matmul"]
    mm_bwd_outs = {v for n in fg.split.backward.nodes if n.name == "aten::matmul" for v in n.outs}
    assert len(mm_fwd) == 1 and not (set(mm_fwd[0].outs) & mm_bwd_outs)


def test_mlp_gradients_against_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x, w1, b1, w2, b2 = (rng.standard_normal(s) for s in [(32, 5), (5, 16), (16,), (16, 3), (3,)])
    onehot = np.eye(3)[rng.integers(0, 3, 32)]

    def loss(x, w1, b1, w2, b2, onehot):
        h = dj.matmul(dj.tanh(dj.matmul(x, w1) + b1), w2) + b2
        return -((h - dj.logsumexp(h, 1, True)) * onehot).sum() / 32.0

    cf = dj.compile(loss)
    ps = [dj.from_numpy(a.copy()).requires_grad_(True) for a in (w1, b1, w2, b2)]
    cf(dj.from_numpy(x), *ps, dj.from_numpy(onehot)).backward()
    tp = [torch.from_numpy(a.copy()).requires_grad_(True) for a in (w1, b1, w2, b2)]
    h = torch.tanh(torch.from_numpy(x) @ tp[0] + tp[1]) @ tp[2] + tp[3]
    (-(torch.log_softmax(h, 1) * torch.from_numpy(onehot)).sum() / 32.0).backward()
    for p, t in zip(ps, tp):
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)
    assert _fused(cf) == ["fused"]


def test_an_input_whose_formulas_give_zeros_gets_zeros_not_none():
    """Eager mode gives ``x ** 0``'s input a gradient of zeros (a node was recorded on its path);
    the fused backward's values do not depend on the incoming gradient there, which must not
    make it None (found by the gradient fuzzer: x0 ** 0 -> linear -> log_softmax).  A path
    through a comparison (bool) records nothing in eager mode: None there, as eager."""
    import dispatch_jit.nn.functional as F

    def pow0(x):
        return F.log_softmax(F.linear(x ** 0, (x ** 0).T), 1).sum()

    def through_bool(x, y):
        return ((x > 0).to(dj.float32) * 2 + y).sum()

    a = np.random.default_rng(0).random((3, 3)).astype(np.float32)
    cf, cb = dj.compile(pow0), dj.compile(through_bool)
    for _ in range(2):
        x = dj.tensor(a, requires_grad=True)
        cf(x).backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.zeros((3, 3), np.float32))
        x, y = dj.tensor(a, requires_grad=True), dj.tensor(a, requires_grad=True)
        cb(x, y).backward()
        assert x.grad is None and y.grad is not None
    assert "fused backward" in cf.explain() and "fused backward" in cb.explain()


def test_backward_chains_of_different_sizes_fuse_into_loops_of_their_own():
    """Two parameters' gradient chains of one rank but different sizes follow each other in the
    backward: one loop over both would not broadcast and ran its ops one by one at every call.
    The joint graph's sizes keep them apart: every backward region compiles and runs as a loop."""
    from helpers import fused_grad

    def f(a, b):
        return (dj.tanh(a) * a).sum() + (dj.tanh(b) * b).sum()
    cf = dj.compile(f)
    rng = np.random.default_rng(8)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((4, 3), (4, 5))]
    grads = []
    for fn in (cf, f):
        xs = [dj.tensor(a, requires_grad=True) for a in arrays]
        for _ in range(3):
            for x in xs:
                x.grad = None
            fn(*xs).backward()
        grads.append([x.grad.numpy() for x in xs])
    for g, e in zip(*grads):
        np.testing.assert_array_equal(g, e)
    fg = fused_grad(cf)
    regions = [n.value for n in fg.backward_graph.nodes if n.op == "fused"]
    assert len(regions) == 2, fg.backward_graph
    assert {fg.split.backward.shapes[r.outputs[0]] for r in regions} == {(4, 3), (4, 5)}
    assert cf._stats.region_eager_runs == 0, cf._stats.region_eager_reason
    assert fg.backward.function is not None and fg.backward.function.calls >= 1
