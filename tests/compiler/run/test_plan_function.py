"""A plan as one compiled function (compiler/run/function.py, run/call_rules.py): a fused backward's forward
and backward plans become one njit function each after their first (interpreted) run.
Oracle: the same plan run interpreted, step by step, on the same inputs: the results must be
equal bit for bit (each rule calls what the eager kernel calls); and eager mode's gradients."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit import nn
from dispatch_jit.tensor import version_of
from helpers import fused_grad

F = nn.functional
RNG = np.random.default_rng(3)
X = dj.from_numpy(RNG.standard_normal((40, 6)).astype(np.float32))
Y = dj.from_numpy(RNG.integers(0, 3, 40))


def _interpreted(plan, tensors):
    """The plan's steps run from Python, as before the plan function existed."""
    fn, plan.function = plan.function, None
    try:
        return plan.run(tensors)
    finally:
        plan.function = fn


def _arrays(x):
    return [None if t is None else t.numpy() for t in (x if isinstance(x, (list, tuple)) else [x])]


def _seed(out):
    return dj.from_numpy(np.full(out.numpy().shape, 0.75, np.float32))


def _check_plans(f, inputs):
    """Each plan's function against its interpreted steps on the same inputs: the same bits."""
    with dj.no_grad():
        outs, extra = f.forward.run(inputs)
        outs_i, extra_i = _interpreted(f.forward, inputs)
    for a, b in zip(_arrays([outs] + list(extra)), _arrays([outs_i] + list(extra_i))):
        np.testing.assert_array_equal(a, b)
    saved = [inputs[i] if kind == "input" else extra[i] for kind, i in f.saved]
    g = [_seed(outs)]
    with dj.no_grad():
        got, want = f.backward.run(saved + g), _interpreted(f.backward, saved + g)
    for a, b in zip(_arrays(got), _arrays(want)):
        if a is None:
            assert b is None
        else:
            np.testing.assert_array_equal(a, b)
    return got


def _loss_fn(model, act=None):
    if act is None:
        return dj.compile(lambda x, y: F.cross_entropy(model(x), y))
    return dj.compile(lambda x, y: F.cross_entropy(model[2](act(model[0](x))), y, reduction="sum"))


def _mlp():
    dj.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))


@pytest.mark.parametrize("act", [None, lambda h: dj.tanh(h) * 0.5 + h],
                         ids=["tanh (a lone op)", "a fused chain, reduction=sum"])
def test_mlp_plans_are_one_function_each_and_equal_the_interpreted_plans(act):
    model = _mlp()
    cf = _loss_fn(model, act)
    for _ in range(2):
        model.zero_grad()
        cf(X, Y).backward()
    f = fused_grad(cf)
    assert f.forward.function is not None, f.forward.function_reason
    assert f.backward.function is not None, f.backward.function_reason
    assert f.forward.function.calls >= 1 and f.backward.function.calls >= 1
    assert "forward: one compiled function" in cf.explain()
    # the same inputs through the function and through the steps: equal bits
    got = _check_plans(f, [X, Y] + [p.detach() for p in model.parameters()])
    assert sum(t is not None for t in got) == 4


def test_training_with_the_plan_functions_equals_eager_training():
    cm, em = _mlp(), _mlp()
    cf = _loss_fn(cm)
    oc, oe = (dj.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (cm, em))
    for step in range(4):
        for m, opt, loss_fn in ((cm, oc, cf), (em, oe, lambda x, y: F.cross_entropy(em(x), y))):
            opt.zero_grad()
            loss = loss_fn(X, Y)
            loss.backward()
            opt.step()
            m.last = loss.item()
        assert cm.last == em.last, step
        for p, q in zip(cm.parameters(), em.parameters()):
            np.testing.assert_array_equal(p.numpy(), q.numpy())
    f = fused_grad(cf)
    assert f.forward.function.calls >= 3 and f.backward.function.calls >= 3


def test_a_strided_input_runs_interpreted_for_that_call():
    model = _mlp()
    cf = _loss_fn(model)
    cf(X, Y).backward()
    f = fused_grad(cf)
    xt = dj.from_numpy(np.asfortranarray(X.numpy()))          # the same values, another layout
    inputs = [xt, Y] + [p.detach() for p in model.parameters()]
    with dj.no_grad():
        outs, extra = f.forward.run(inputs)
    fn = f.forward.function
    assert fn.declined == 1 and "C-contiguous" in fn.declined_reason
    with dj.no_grad():
        outs_c, extra_c = f.forward.run([X] + inputs[1:])
    assert fn.declined == 1
    for a, b in zip(_arrays([outs] + list(extra)), _arrays([outs_c] + list(extra_c))):
        np.testing.assert_array_equal(a, b)


def test_a_first_call_on_strided_inputs_says_why_there_is_no_function():
    model = _mlp()
    cf = _loss_fn(model)
    cf(dj.from_numpy(np.asfortranarray(X.numpy())), Y).backward()
    assert "not C-contiguous" in fused_grad(cf).forward.function_reason


def test_a_target_out_of_range_raises_eager_modes_error():
    model = _mlp()
    cf = _loss_fn(model)
    cf(X, Y).backward()
    bad = Y.numpy().copy()
    bad[7] = 3
    with pytest.raises(Exception) as compiled:
        cf(X, dj.from_numpy(bad))
    with pytest.raises(type(compiled.value)) as eager:
        F.cross_entropy(model(X), dj.from_numpy(bad))
    assert str(compiled.value) == str(eager.value)
    assert "refused its input" in fused_grad(cf).forward.function.declined_reason


def test_an_op_without_a_rule_keeps_the_plan_interpreted_and_says_which():
    model = _mlp()
    cf = dj.compile(lambda x, y: F.cross_entropy(dj.cumsum(model(x), 1), y))
    cf(X, Y).backward()
    f = fused_grad(cf)
    assert f.forward.function is None
    assert "aten::cumsum" in f.forward.function_reason and "no rule" in f.forward.function_reason
    assert "interpreted step by step" in cf.explain()


T = dj.from_numpy(RNG.standard_normal((40, 3)).astype(np.float32))
_REDUCING = {
    "full": lambda m, x, t: ((m(x) - t) * (m(x) - t)).mean(),
    "rows": lambda m, x, t: (dj.tanh(m(x)) * t).sum(1),
    "cols": lambda m, x, t: (m(x) * t).sum(0, keepdim=True),
}


@pytest.mark.parametrize("kind", sorted(_REDUCING))
@pytest.mark.parametrize("n", [40, 4096], ids=["small", "parallel (2**18 elements)"])
def test_reduction_epilogues_run_in_the_plan_function(kind, n):
    model = nn.Sequential(nn.Linear(6, 64), nn.Tanh(), nn.Linear(64, 64)) if n > 40 else _mlp()
    x = dj.from_numpy(np.random.default_rng(n).standard_normal((n, 6)).astype(np.float32))
    t = dj.from_numpy(np.random.default_rng(n + 1).standard_normal((n, 64 if n > 40 else 3)).astype(np.float32))
    cf = dj.compile(lambda x, t: _REDUCING[kind](model, x, t))
    for _ in range(2):
        model.zero_grad()
        out = cf(x, t)
        out.backward(_seed(out))
    f = fused_grad(cf)
    assert f.forward.function is not None and f.forward.function.calls == 1, f.forward.function_reason
    # the backward reads a broadcast view of the incoming gradient (as_strided inside the function)
    assert f.backward.function is not None and f.backward.function.calls == 1, f.backward.function_reason
    assert "_as_strided(" in f.backward.function.source
    _check_plans(f, [x, t] + [p.detach() for p in model.parameters()])
    # and against eager mode's gradients, to rounding (the fused backward may add in another order)
    grads = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    out = _REDUCING[kind](model, x, t)
    out.backward(_seed(out))
    for a, p in zip(grads, model.parameters()):
        np.testing.assert_allclose(a, p.grad.numpy(), rtol=1e-4, atol=1e-6)



@pytest.mark.parametrize("n", [0, 5], ids=["empty", "five"])
def test_a_float16_plan_stays_interpreted_past_its_third_run(n):
    """Found by a long fuzz run (seed 1111, graph 46): in compiled mode, a plan with a reduction over
    float16 values tried to become one compiled function on its third run and crashed inside
    Numba's lowering (its CPU target takes no float16 arrays).  It now stays interpreted."""
    a = np.linspace(-2, 2, n).astype(np.float16)

    def f(x):
        return dj.repeat(x.logsumexp(dim=-1).sinh().sum(), [1])

    want = f(dj.from_numpy(a)).numpy()
    for _ in range(5):
        with dj.execution_mode("compiled"):
            got = f(dj.from_numpy(a))
        np.testing.assert_array_equal(got.numpy(), want)


def _user_loss(lib):
    """The loss as users write it: log-softmax and an advanced index (its bias gradients are
    reshapes of column sums: views among the backward plan's outputs)."""
    def loss(x, y, w1, b1, w2, b2):
        h = (x @ w1 + b1).relu()
        logp = (h @ w2 + b2).log_softmax(dim=1)
        return -logp[lib.arange(40), y].mean()
    return loss


def test_a_view_among_a_plans_outputs_is_returned_by_the_plan_function():
    rng = np.random.default_rng(5)
    w = [rng.standard_normal(s).astype(np.float32) * 0.3 for s in ((6, 16), (16,), (16, 3), (3,))]
    cps, eps = ([dj.tensor(a.copy(), requires_grad=True) for a in w] for _ in range(2))
    cf, ef = dj.compile(_user_loss(dj)), _user_loss(dj)
    kept = []
    for step in range(4):
        for ps, loss_fn in ((cps, cf), (eps, ef)):
            loss_fn(X, Y, *ps).backward()
            if ps is cps:
                kept.append([p.grad.numpy().copy() for p in ps] + [cps[3].grad])
            with dj.no_grad():
                for p in ps:
                    p -= 0.1 * p.grad
                    p.grad = None
        for p, q in zip(cps, eps):
            np.testing.assert_array_equal(p.numpy(), q.numpy())
    f = fused_grad(cf)
    assert f.backward.function is not None, f.backward.function_reason
    assert f.backward.function.view_outs, "the bias gradients are no longer views: the test tests nothing"
    assert f.backward.function.calls >= 2
    # each call's view has its own memory (a later call does not write into a kept gradient)
    for k in range(len(kept)):
        np.testing.assert_array_equal(kept[k][3], kept[k][4].numpy())
    # the plan function's view shares its base's version counter and keeps the base, as eager's view
    saved = [X, Y] + [p.detach() for p in cps]
    fwd = f.forward.run(saved)
    outs, extra = fwd
    args = [saved[i] if kind == "input" else extra[i] for kind, i in f.saved] + [_seed(outs)]
    with dj.no_grad():
        got, want = f.backward.run(args), _interpreted(f.backward, args)
    for a, b in zip(_arrays(got), _arrays(want)):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_array_equal(a, b)
    gb = [t for t in got if t is not None and "_base" in t.__dict__]
    assert gb, "no view among the function's outputs"
    for t in gb:
        base = t.__dict__["_base"]
        assert np.shares_memory(t.numpy(), base.numpy())
        before = version_of(t)
        with dj.no_grad():
            base.add_(1.0)
        assert version_of(t) == before + 1


def test_an_input_strided_at_the_first_call_keeps_its_strides_and_the_function():
    """A plan whose input is a strided view at every call (a saved transposed view, as attention's
    q, k and v): the function is made for those strides and runs wherever a call has them, instead of
    declining every call; another layout still runs interpreted."""
    from dispatch_jit.compiler.run.plan import Plan
    from dispatch_jit.compiler.run.steps import Stats
    a = RNG.standard_normal((4, 3)).astype(np.float32)
    cf = dj.compile(lambda x: (dj.tanh(x) * x).sum())
    cf(dj.tensor(a, requires_grad=True)).backward()
    f = fused_grad(cf)
    assert f.saved == [("input", 0)], f.saved
    strided = dj.from_numpy(np.ascontiguousarray(a.T)).transpose(0, 1)
    assert not strided.is_contiguous()
    g = dj.tensor(np.float32(0.75))
    plan = Plan(f.backward_graph, Stats(), one_function=True)
    with dj.no_grad():
        want = _arrays(_interpreted(f.backward, [dj.tensor(a), g]))
        for _ in range(3):
            np.testing.assert_array_equal(_arrays(plan.run([strided, g]))[0], want[0])
        fn = plan.function
        assert fn is not None, plan.function_reason
        assert fn.calls == 2 and fn.declined == 0, fn.declined_reason
        np.testing.assert_array_equal(_arrays(plan.run([dj.tensor(a), g]))[0], want[0])
    assert fn.declined == 1 and "strides" in fn.declined_reason


def test_a_reshape_sunk_onto_broadcast_leaves_expands_them_first():
    """kron(v, v) is reshape(v[:, None, :, None] * v[None, :, None, :]); its backward recomputes
    the product through views sunk onto the two leaves, which broadcast against each other.  The
    plan function's copy of that reshape must expand each leaf to the product's shape first, as
    the interpreted ViewOp does (it reshaped the bare (2, 1, 2, 1) leaf to (4, 4) and raised
    "total size of new array must be unchanged"; found by the gradient fuzzer, seed 1307)."""
    a = np.array([[1.47, 1.09], [1.70, 0.77]])

    def loss(x):
        v = x.exp()
        return (v * 0.5).sum() + (dj.i0(v.kron(v)) * 1.5).sum()

    cf = dj.compile(loss)
    want = None
    for _ in range(4):          # the plans become one function each from their third run
        x = dj.from_numpy(a.copy()).requires_grad_(True)
        loss(x).backward()
        want = x.grad.numpy()
        y = dj.from_numpy(a.copy()).requires_grad_(True)
        cf(y).backward()
        np.testing.assert_array_equal(y.grad.numpy(), want)
    f = fused_grad(cf)
    assert f.backward.function is not None, cf.explain()


def test_a_reduced_value_smaller_than_its_loop_keeps_the_interpreted_plans_result():
    # (v3 * 0.5).sum() fuses into v4 = v3 + x0's loop, whose shape (3, 3, 1, 2) is larger than v3's
    # (3, 1, 1, 2): the plan function summed v3 over the broadcast loop, 3x the sum, from the call the
    # lazy plan became one function on (found by the gradient fuzzer, hypothesis seed 1312)
    x = dj.from_numpy(np.array([[[0.5]], [[1.5]], [[2.5]]]))

    def f(x0):
        v3 = dj.stack([x0, x0], axis=3)
        v4 = v3 + x0
        return (v3 * 0.5).sum(), (v4 * 1.5).sum()

    want = [t.item() for t in f(x)]
    for _ in range(5):
        with dj.execution_mode("compiled"):
            assert [t.item() for t in f(x)] == want
