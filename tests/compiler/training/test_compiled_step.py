"""``dj.compile`` of a whole training step (compiler/training/whole_step.py, training/functionalize.py): the forward,
``loss.backward()`` and the update (dj.optim's SGD, Adam, AdamW or a hand-written one) traced
into one graph and run as one plan.  Oracle: the same model from the same seed, stepped
eagerly; losses, parameters, gradients (None where eager's are), optimizer state and version
counters must agree.  The plan's matmuls are NumPy's dot where eager's linear may take its
own loop nest (kernels/linalg/cpu.py), so floats are compared to 1e-6 relative."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit import nn
from dispatch_jit.compiler.run.cached import EagerEntry
from dispatch_jit.compiler.training.whole_step import StepEntry
from dispatch_jit.tensor import version_of

F = nn.functional
RNG = np.random.default_rng(1)
X = dj.from_numpy(RNG.standard_normal((32, 6)).astype(np.float32))
Y = dj.from_numpy(RNG.integers(0, 3, 32))


def _mlp():
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))


def _twins(make_opt):
    out = []
    for _ in range(2):
        dj.manual_seed(0)
        m = _mlp()
        out.append((m, make_opt(m.parameters()) if make_opt else None))
    return out


def _close(a, b, what):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7, err_msg=what)


def _same_state(cm, em, co, eo, what):
    for i, (p, q) in enumerate(zip(cm.parameters(), em.parameters())):
        _close(p.numpy(), q.numpy(), f"{what}: parameter {i}")
        assert (p.grad is None) == (q.grad is None), f"{what}: parameter {i}'s grad"
        if p.grad is not None:
            _close(p.grad.numpy(), q.grad.numpy(), f"{what}: grad {i}")
        assert version_of(p) == version_of(q), f"{what}: parameter {i}'s version"
        if co is not None:
            sc, se = co.state.get(p, {}), eo.state.get(q, {})
            assert sorted(sc) == sorted(se), what
            for k in sc:
                if isinstance(sc[k], dj.Tensor):
                    _close(sc[k].numpy(), se[k].numpy(), f"{what}: state {k} of {i}")
                    assert version_of(sc[k]) == version_of(se[k]), f"{what}: state {k}'s version"
                else:
                    assert sc[k] == se[k], f"{what}: state {k} of {i}"


def _step_of(m, opt, zero_first=True):
    def step(x, y):
        if zero_first:
            opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        if not zero_first:
            opt.zero_grad()
        return loss
    return step


OPTIMIZERS = {
    "sgd": lambda ps: dj.optim.SGD(ps, lr=0.1),
    "sgd-momentum-wd": lambda ps: dj.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01),
    "sgd-nesterov": lambda ps: dj.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True),
    "adam": lambda ps: dj.optim.Adam(ps, lr=0.01),
    "adam-amsgrad-wd": lambda ps: dj.optim.Adam(ps, lr=0.01, weight_decay=0.1, amsgrad=True),
    "adamw": lambda ps: dj.optim.AdamW(ps, lr=0.01),
}


def _compiled_variant(f):
    entry = f._last
    assert isinstance(entry, StepEntry), f.explain()
    return [v for v in entry.variants.values() if v.__class__ is not str]


@pytest.mark.parametrize("name", list(OPTIMIZERS))
@pytest.mark.parametrize("zero_first", [True, False])
def test_whole_step_equals_eager(name, zero_first):
    (cm, co), (em, eo) = _twins(OPTIMIZERS[name])
    compiled, eager = dj.compile(_step_of(cm, co, zero_first)), _step_of(em, eo, zero_first)
    for k in range(5):
        lc, le = compiled(X, Y), eager(X, Y)
        _close(lc.numpy(), le.numpy(), f"{name} step {k}: loss")
        _same_state(cm, em, co, eo, f"{name} step {k}")
    variants = _compiled_variant(compiled)
    assert variants and variants[-1].runs >= 3, compiled.explain()
    # after its first (interpreted) run the step's plan is one compiled function
    assert variants[-1].plan.function is not None, compiled.explain()
    assert "whole step compiled" in compiled.explain()


def _sgd_by_hand(m, x, y):
    loss = F.cross_entropy(m(x), y)
    loss.backward()
    with dj.no_grad():
        for p in m.parameters():
            p -= 0.1 * p.grad
            p.grad = None
    return loss


def test_hand_written_update_compiles():
    (cm, _), (em, _) = _twins(None)
    compiled = dj.compile(lambda x, y: _sgd_by_hand(cm, x, y))
    for k in range(4):
        lc, le = compiled(X, Y), _sgd_by_hand(em, X, Y)
        _close(lc.numpy(), le.numpy(), f"step {k}: loss")
        _same_state(cm, em, None, None, f"step {k}")
    assert _compiled_variant(compiled)[-1].runs == 4, compiled.explain()


def test_grad_accumulates_when_not_zeroed():
    """No zero_grad: .grad accumulates across steps, as eager mode's (grad + g, a new tensor)."""
    (cm, co), (em, eo) = _twins(OPTIMIZERS["sgd"])

    def step_of(m, opt):
        def step(x, y):
            F.cross_entropy(m(x), y).backward()
            opt.step()
        return step
    compiled, eager = dj.compile(step_of(cm, co)), step_of(em, eo)
    for k in range(4):
        assert compiled(X, Y) is None
        eager(X, Y)
        _same_state(cm, em, co, eo, f"step {k}")


def test_adam_bias_correction_uses_each_step():
    (cm, co), (em, eo) = _twins(OPTIMIZERS["adam"])
    compiled, eager = dj.compile(_step_of(cm, co)), _step_of(em, eo)
    for _ in range(6):
        compiled(X, Y)
        eager(X, Y)
    assert all(s["step"] == 6 for s in co.state.values())
    _same_state(cm, em, co, eo, "after 6 steps")
    # the bias corrections are runtime scalars: one step trace for the six calls after the first
    assert compiled._last.traces == 2, compiled.explain()


def test_recompiles_only_when_a_guard_changes():
    """A new learning rate is a new runtime scalar (tests/compiler/training/test_step_hyperparams.py); what
    changes the update's form is guarded: weight decay turned off, nesterov turned on."""
    (cm, co), (em, eo) = _twins(OPTIMIZERS["sgd-momentum-wd"])
    compiled, eager = dj.compile(_step_of(cm, co)), _step_of(em, eo)
    for _ in range(4):
        compiled(X, Y), eager(X, Y)
    entry = compiled._last
    assert entry.traces == 2, compiled.explain()       # the first step (state made eagerly), then one
    assert "first step creates its state" in compiled.explain()
    for opt in (co, eo):
        opt.param_groups[0]["lr"] = 0.05               # a number: read per call, no new trace
    for _ in range(2):
        compiled(X, Y), eager(X, Y)
    assert entry.traces == 2, compiled.explain()
    for opt in (co, eo):
        opt.param_groups[0]["weight_decay"] = 0.0      # zero: the update loses a term
    compiled(X, Y), eager(X, Y)
    assert entry.traces == 3
    for opt in (co, eo):
        opt.param_groups[0]["nesterov"] = True         # a flag: guarded by value
    compiled(X, Y), eager(X, Y)
    assert entry.traces == 4
    for opt in (co, eo):
        opt.param_groups[0].update(nesterov=False, weight_decay=0.02)    # back: that variant is cached
    compiled(X, Y), eager(X, Y)
    assert entry.traces == 4
    _same_state(cm, em, co, eo, "after the changes")
    assert compiled.cache_info().traces == 1           # the plain trace that found the step


def _hooked(m, opt):
    m[0].weight.register_hook(lambda g: g * 2)


FALLBACKS = {
    "a hook": (lambda m, opt, x, y: _plain(m, opt, x, y), _hooked, "hook"),
    "retain_graph": (lambda m, opt, x, y: _plain(m, opt, x, y, retain_graph=True), None, "retain_graph"),
    "create_graph": (lambda m, opt, x, y: _plain(m, opt, x, y, create_graph=True), None, "create_graph"),
    "a second backward": (lambda m, opt, x, y: _twice(m, opt, x, y), None, "second backward"),
    "data-dependent control flow": (lambda m, opt, x, y: _branchy(m, opt, x, y), None, "bool()"),
    "zero_grad(set_to_none=False)": (lambda m, opt, x, y: _zeros(m, opt, x, y), None, "set_to_none=False"),
    "a closure": (lambda m, opt, x, y: _closure(m, opt, x, y), None, "closure"),
    "dropout": (lambda m, opt, x, y: _dropout(m, opt, x, y), None, "random numbers"),
    "an update through .data": (lambda m, opt, x, y: _through_data(m, x, y), None, ".data"),
}


def _through_data(m, x, y):
    F.cross_entropy(m(x), y).backward()
    for p in m.parameters():
        p.data -= 0.1 * p.grad
        p.grad = None


def _dropout(m, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(F.dropout(m(x), 0.5, True), y)
    loss.backward()
    opt.step()
    return loss


def _plain(m, opt, x, y, **kw):
    opt.zero_grad()
    loss = F.cross_entropy(m(x), y)
    loss.backward(**kw)
    opt.step()
    return loss


def _twice(m, opt, x, y):
    opt.zero_grad()
    F.cross_entropy(m(x), y).backward()
    F.cross_entropy(m(x), y).backward()
    opt.step()


def _branchy(m, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(m(x), y)
    if loss > 0.5:
        loss = loss * 2.0
    loss.backward()
    opt.step()


def _zeros(m, opt, x, y):
    opt.zero_grad(set_to_none=False)
    F.cross_entropy(m(x), y).backward()
    opt.step()


def _closure(m, opt, x, y):
    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        return loss
    return opt.step(closure)


@pytest.mark.parametrize("case", list(FALLBACKS))
def test_unusual_steps_run_eagerly_and_say_why(case):
    body, setup, words = FALLBACKS[case]
    (cm, co), (em, eo) = _twins(OPTIMIZERS["sgd"])
    if setup is not None:
        setup(cm, co), setup(em, eo)
    compiled = dj.compile(lambda x, y: body(cm, co, x, y))
    for k in range(3):
        dj.manual_seed(10 + k)        # the eager twin draws what the compiled call drew
        compiled(X, Y)
        dj.manual_seed(10 + k)
        body(em, eo, X, Y)
        _same_state(cm, em, co, eo, f"{case}, step {k}")
    text = compiled.explain()
    assert "last call ran eagerly" in text and words in text, text
    assert not _compiled_variant(compiled), text


class _MySGD(dj.optim.SGD):
    pass


def test_unknown_optimizer_runs_eagerly():
    (cm, co), (em, eo) = _twins(lambda ps: _MySGD(ps, lr=0.1))
    compiled = dj.compile(_step_of(cm, co))
    for _ in range(2):
        compiled(X, Y), _step_of(em, eo)(X, Y)
    _same_state(cm, em, co, eo, "subclass")
    assert "_MySGD.step() is not compiled" in compiled.explain()


def test_optimizer_only_function_is_not_a_step():
    """An optimizer step without backward() in the function: nothing to compile as a step."""
    (cm, co), (em, eo) = _twins(OPTIMIZERS["sgd"])
    F.cross_entropy(cm(X), Y).backward()
    F.cross_entropy(em(X), Y).backward()
    compiled = dj.compile(lambda: co.step())
    compiled()
    eo.step()
    _same_state(cm, em, co, eo, "step only")
    assert "step() before backward()" in compiled.explain()


def test_a_plain_compiled_loss_is_unchanged():
    (cm, _), _ = _twins(None)
    f = dj.compile(lambda x, y: F.cross_entropy(cm(x), y))
    f(X, Y).backward()
    assert not isinstance(f._last, (StepEntry, EagerEntry))


def _functional_step(x, y, w1, b1, w2, b2):
    """The parameters as arguments (benchmarks/bench_compiled_training.py's step)."""
    h = dj.matmul(dj.tanh(dj.matmul(x, w1) + b1), w2) + b2
    loss = -((h - dj.logsumexp(h, 1, True)) * y).sum() / 32.0
    loss.backward()
    with dj.no_grad():
        for p in (w1, b1, w2, b2):
            p.sub_(p.grad * 0.1)
            p.grad = None
    return loss


def test_parameters_passed_as_arguments():
    rng = np.random.default_rng(3)
    onehot = dj.from_numpy(np.eye(3, dtype=np.float32)[rng.integers(0, 3, 32)])
    shapes = [(6, 8), (8,), (8, 3), (3,)]
    init = [rng.standard_normal(s).astype(np.float32) * 0.3 for s in shapes]
    cps, eps = ([dj.from_numpy(a.copy()).requires_grad_(True) for a in init] for _ in range(2))
    compiled = dj.compile(_functional_step)
    for k in range(4):
        _close(compiled(X, onehot, *cps).numpy(), _functional_step(X, onehot, *eps).numpy(), f"step {k}: loss")
        for i, (p, q) in enumerate(zip(cps, eps)):
            _close(p.numpy(), q.numpy(), f"step {k}: parameter {i}")
            assert p.grad is None and q.grad is None
            assert version_of(p) == version_of(q)
    # other tensors of the same sizes: the same variant, reading and writing the new ones
    others = [dj.from_numpy(a.copy()).requires_grad_(True) for a in init]
    twins = [dj.from_numpy(a.copy()).requires_grad_(True) for a in init]
    _close(compiled(X, onehot, *others).numpy(), _functional_step(X, onehot, *twins).numpy(), "new tensors")
    for p, q in zip(others, twins):
        _close(p.numpy(), q.numpy(), "new tensors: parameter")
    assert compiled._last.traces == 1 and _compiled_variant(compiled)[-1].runs == 5, compiled.explain()


SCALE = dj.tensor(1.0)


def test_a_captured_tensor_is_read_anew():
    """A global tensor the step reads is fetched at every call: rebinding it changes the step."""
    global SCALE
    (cm, co), (em, eo) = _twins(OPTIMIZERS["sgd"])

    def step_of(m, opt):
        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(m(x), y) * SCALE
            loss.backward()
            opt.step()
            return loss
        return step
    compiled, eager = dj.compile(step_of(cm, co)), step_of(em, eo)
    try:
        for k, s in enumerate((1.0, 1.0, 3.0, 0.5)):
            SCALE = dj.tensor(s)
            _close(compiled(X, Y).numpy(), eager(X, Y).numpy(), f"step {k}: loss")
            _same_state(cm, em, co, eo, f"step {k}")
    finally:
        SCALE = dj.tensor(1.0)
    assert _compiled_variant(compiled)[-1].runs >= 3, compiled.explain()


def test_a_write_to_a_tensor_with_views_runs_eagerly():
    """``v = p[:]`` then ``p -= ...``: eager's view shows the new value, a functional graph's view the
    old one, so the step runs eagerly (the copies into the buffers would differ)."""
    def step_of(m, bufs):
        def step(x, y):
            F.cross_entropy(m(x), y).backward()
            with dj.no_grad():
                for p, b in zip(m.parameters(), bufs):
                    v = p[:]
                    p -= 0.1 * p.grad
                    b.copy_(v)
                    p.grad = None
        return step
    (cm, _), (em, _) = _twins(None)
    cb, eb = ([dj.zeros_like(p) for p in m.parameters()] for m in (cm, em))
    compiled, eager = dj.compile(step_of(cm, cb)), step_of(em, eb)
    for k in range(3):
        compiled(X, Y), eager(X, Y)
        _same_state(cm, em, None, None, f"step {k}")
        for i, (a, b) in enumerate(zip(cb, eb)):
            _close(a.numpy(), b.numpy(), f"step {k}: buffer {i}")
    assert "has views" in compiled.explain(), compiled.explain()


def test_updates_are_written_in_place_only_where_no_alias_can_see_it():
    """The plan function writes each parameter's new value straight into its array (planfn._inplace)
    when every input owns its memory; with an input that is a view of other memory, it writes new
    arrays, which the entry copies in (the same values)."""
    (cm, co), (em, eo) = _twins(OPTIMIZERS["sgd-momentum-wd"])
    compiled, eager = dj.compile(_step_of(cm, co)), _step_of(em, eo)
    arrays = [p._data for p in cm.parameters()]
    for k in range(3):
        compiled(X, Y), eager(X, Y)
    _same_state(cm, em, co, eo, "in place")
    assert all(p._data is a for p, a in zip(cm.parameters(), arrays))
    (v,) = _compiled_variant(compiled)[-1:]
    fn = v.plan.function
    assert fn is not None and len(fn.inplace) == len(v.trace.writes), compiled.explain()
    tr = v.trace
    scalars = [co.param_groups[gi][key] if j < 0 else co.param_groups[gi][key][j] for _, gi, key, j in tr.option_reads]
    scalars += [x for _, gi, ps, _ in tr.scalar_sources for row in co.step_values(co.param_groups[gi], ps) for x in row]
    owned = v.inputs([X, Y], ())
    env = fn(owned, scalars)
    assert all(env[v.write_ids[j]]._data is owned[pos]._data for _, pos in fn.inplace
               for j in [tr.write_inputs.index(pos)])
    box = np.zeros((2,) + tuple(X.shape), np.float32)
    box[0] = X.numpy()
    viewed = [dj.from_numpy(box[0])] + v.inputs([X, Y], ())[1:]       # X's data: a view of ``box``
    before = [t.numpy().copy() for t in viewed]
    env = fn(viewed, scalars)
    for _, pos in fn.inplace:
        assert env[v.write_ids[tr.write_inputs.index(pos)]]._data is not viewed[pos]._data
    for t, b in zip(viewed, before):
        np.testing.assert_array_equal(t.numpy(), b)


def test_a_second_backward_of_the_loss_raises_eagers_error():
    """The returned loss requires grad and has a grad_fn whose graph is freed, as eager mode's after
    backward(): a second ``loss.backward()`` raises the same error class and message."""
    (cm, co), (em, eo) = _twins(OPTIMIZERS["sgd"])
    compiled, eager = dj.compile(_step_of(cm, co)), _step_of(em, eo)
    for _ in range(3):
        lc, le = compiled(X, Y), eager(X, Y)
    assert isinstance(compiled._last, StepEntry) and not compiled._last.last_reason, compiled.explain()
    assert lc.requires_grad and le.requires_grad and lc.grad_fn is not None and not lc.is_leaf
    grads = [p.grad for p in cm.parameters()]
    errors = []
    for loss in (lc, le):
        with pytest.raises(dj.errors.AutogradError, match="backward through the graph a second time") as e:
            loss.backward()
        errors.append(str(e.value))
    assert "CompiledStepBackward" in errors[0] and "retain_graph=True" in errors[0]
    assert all(p.grad is g for p, g in zip(cm.parameters(), grads))      # nothing ran


def test_only_the_loss_gets_the_steps_grad_fn():
    """Only result tensors that required grad in the trace get the step's grad_fn: a parameter
    returned after its update (under no_grad: eager's value requires no new graph) does not, and
    the parameter stays a leaf."""
    (cm, co), _ = _twins(OPTIMIZERS["sgd"])

    def step(x, y):
        co.zero_grad()
        loss = F.cross_entropy(cm(x), y)
        loss.backward()
        co.step()
        return loss, cm[0].bias
    compiled = dj.compile(step)
    for _ in range(3):
        loss, bias = compiled(X, Y)
    assert bias.grad_fn is None and cm[0].bias.is_leaf and cm[0].bias.grad_fn is None
    np.testing.assert_array_equal(bias.numpy(), cm[0].bias.numpy())
    assert loss.grad_fn is not None and not compiled._last.last_reason, compiled.explain()
