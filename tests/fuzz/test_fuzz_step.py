"""Whole training steps under @dj.compile (compiler/training/whole_step.py) against the same steps run eagerly:
random MLPs (sizes, activation, loss), optimizers (SGD plain / momentum / nesterov / weight decay,
Adam, AdamW, amsgrad) or a hand-written update, ``zero_grad`` before or after the update or not at
all.  Per step the loss, every parameter, its ``.grad`` (None where eager's is), the optimizer's
state and the version counters must agree; the plan's matmuls may round differently from eager's
linear (NumPy's dot against its own loop nest), so floats agree to 1e-5 relative.  Every step after
the state exists must have run the compiled plan (``explain()`` otherwise says why not).  With a
schedule, every numeric option of the optimizer changes before every step (both twins alike): the
numbers are runtime scalars of the plan, so a schedule traces no more than a constant setting.
A third twin runs the same steps under ``dj.execution_mode("compiled")`` (the update recorded into the step's
pending graph, lazy/update.py): it must equal eager mode bit for bit.  ``test_fuzz_step_with_changes``
changes the three models alike between steps (a layer appended, a gradient hook on a parameter, a
forward or forward pre-hook on a layer, one of those hooks removed): every step must still equal
eager's (compiler/structure.py: a change retraces, never a stale plan)."""

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, strategies as st

import dispatch_jit as dj
from dispatch_jit import nn
from dispatch_jit.compiler.run import segments
from dispatch_jit.compiler.training.whole_step import StepEntry
from dispatch_jit.errors import AutogradError, ShapeError
from dispatch_jit.tensor import version_of
from fuzz_settings import fuzz_settings
from helpers import assert_same

F = nn.functional

try:
    import torch
except ImportError:       # the PyTorch comparisons are skipped; the three modes are still compared
    torch = None

# the tables the fuzzer draws from: activations (smooth: a kink would turn a rounding difference
# into a different gradient), losses, updates
ACTIVATIONS = {"tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "silu": nn.SiLU, "gelu": nn.GELU}
LOSSES = {
    "cross_entropy": lambda out, y, t: F.cross_entropy(out, y),
    "mse": lambda out, y, t: F.mse_loss(out, t),
}
UPDATES = {
    "sgd": lambda ps: dj.optim.SGD(ps, lr=0.1),
    "sgd-momentum": lambda ps: dj.optim.SGD(ps, lr=0.05, momentum=0.9, dampening=0.1),
    "sgd-nesterov-wd": lambda ps: dj.optim.SGD(ps, lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.01),
    "sgd-maximize": lambda ps: dj.optim.SGD(ps, lr=0.01, maximize=True),
    "adam": lambda ps: dj.optim.Adam(ps, lr=0.01),
    "adam-amsgrad-wd": lambda ps: dj.optim.Adam(ps, lr=0.01, weight_decay=0.05, amsgrad=True),
    "adamw": lambda ps: dj.optim.AdamW(ps, lr=0.01, betas=(0.8, 0.9)),
    "by hand": None,
}
ZERO = ("before", "after", "never")


def _schedule(opt, k):
    """Step ``k`` of a schedule that changes every number of every group (lr, momentum, dampening,
    weight decay, betas, eps), keeping zeros zero (a zero changes the update's form: a new trace)."""
    for g in opt.param_groups:
        for key, v in g.items():
            if v.__class__ is float and v:
                g[key] = v * (0.9 if key in ("momentum", "dampening") else 0.8) ** k
            elif key == "betas":
                g[key] = tuple(b * 0.99 ** k for b in v)


def _step_of(model, opt, loss_of, zero):
    def step(x, y, t):
        if zero == "before" and opt is not None:
            opt.zero_grad()
        loss = loss_of(model(x), y, t)
        loss.backward()
        if opt is None:
            with dj.no_grad():
                for p in model.parameters():
                    p -= 0.05 * p.grad
                    if zero != "never":
                        p.grad = None
        else:
            opt.step()
            if zero == "after":
                opt.zero_grad()
        return loss
    return step


def _check(a, b, what):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=what)


def _compare(m, o, em, eo, check, what):
    """Parameters, their .grad (None where eager's is), versions and optimizer state against eager's."""
    for i, (p, q) in enumerate(zip(m.parameters(), em.parameters())):
        check(p.detach().numpy(), q.detach().numpy(), f"{what}, parameter {i}")
        assert (p.grad is None) == (q.grad is None), f"{what}, grad {i}"
        if p.grad is not None:
            check(p.grad.numpy(), q.grad.numpy(), f"{what}, grad {i}")
        assert version_of(p) == version_of(q), f"{what}, version of {i}"
        if o is not None:
            sc, se = o.state.get(p, {}), eo.state.get(q, {})
            assert sorted(sc) == sorted(se), what
            for key, v in sc.items():
                if isinstance(v, dj.Tensor):
                    check(v.numpy(), se[key].numpy(), f"{what}, state {key} of {i}")
                else:
                    assert v == se[key], what


@fuzz_settings(6)
@given(n=st.integers(1, 12), d=st.integers(1, 6), h=st.integers(1, 9), c=st.integers(2, 4),
       act=st.sampled_from(sorted(ACTIVATIONS)), loss=st.sampled_from(sorted(LOSSES)),
       update=st.sampled_from(sorted(UPDATES)), zero=st.sampled_from(ZERO), schedule=st.booleans(),
       seed=st.integers(0, 2**16), segment_lines=st.sampled_from([None, 3]))
def test_fuzz_whole_step(n, d, h, c, act, loss, update, zero, schedule, seed, segment_lines):
    # segment_lines 3: the plan functions compiled as segments of ~3 lines (compiler/run/segments.py)
    with mock.patch.object(segments, "SEGMENT_LINES", segment_lines or segments.SEGMENT_LINES):
        _whole_step(n, d, h, c, act, loss, update, zero, schedule, seed)


def _whole_step(n, d, h, c, act, loss, update, zero, schedule, seed):
    rng = np.random.default_rng(seed)
    x = dj.from_numpy(rng.standard_normal((n, d)).astype(np.float32))
    y = dj.from_numpy(rng.integers(0, c, n))
    t = dj.from_numpy(rng.standard_normal((n, c)).astype(np.float32))
    runs = []
    for _ in range(3):
        dj.manual_seed(seed)
        model = nn.Sequential(nn.Linear(d, h), ACTIVATIONS[act](), nn.Linear(h, c))
        opt = UPDATES[update](model.parameters()) if UPDATES[update] else None
        runs.append((model, opt, _step_of(model, opt, LOSSES[loss], zero)))
    (cm, co, cstep), (em, eo, estep), (lm, lo, lstep) = runs
    compiled = dj.compile(cstep)
    what = f"{act}, {loss}, {update}, zero_grad {zero}, schedule {schedule}"
    for k in range(3):
        if schedule and co is not None:
            _schedule(co, k), _schedule(eo, k), _schedule(lo, k)
        want = estep(x, y, t).numpy()
        with dj.execution_mode("compiled"):      # compiled mode: the update recorded into the step's graph
            lazy = lstep(x, y, t)
        assert_same(lazy.numpy(), want, f"{what}: compiled mode's loss of step {k}")
        _check(compiled(x, y, t).numpy(), want, f"{what}: loss of step {k}")
        for (m, o, check, how) in ((cm, co, _check, "whole step"), (lm, lo, assert_same, "compiled mode")):
            _compare(m, o, em, eo, check, f"{what}, {how}: step {k}")
    entry = compiled._last
    assert isinstance(entry, StepEntry), compiled.explain()
    # the last call ran the compiled plan (the first may have made the optimizer's state eagerly)
    assert not entry.last_reason, compiled.explain()
    # at most two keys (.grad None or not before the call) over the three calls, whatever the values
    assert entry.traces <= 2 and not entry.by_value, compiled.explain()


def _grad_hook(model, rng, seed):
    ps = list(model.parameters())
    k, s = int(rng.integers(len(ps))), float(rng.choice([0.0, 0.5, -2.0]))
    return lambda m: list(m.parameters())[k].register_hook(lambda g: g * s)


def _forward_hook(model, rng, seed):
    k, s = int(rng.integers(len(model))), float(rng.choice([0.5, 2.0]))
    return lambda m: m[k].register_forward_hook(lambda mod, args, out: out * s)


def _pre_hook(model, rng, seed):
    k, s = int(rng.integers(len(model))), float(rng.choice([0.5, 2.0]))
    return lambda m: m[k].register_forward_pre_hook(lambda mod, args: (args[0] * s,))


def _append(model, rng, seed):
    width = model[len(model) - 1].out_features      # the classes: the loss's input keeps its shape

    def add(m):
        dj.manual_seed(seed)
        m.append(nn.Linear(width, width))
    return add


# each: (model, rng, seed) -> a change to make to each twin alike (returning a handle or None)
CHANGES = {"grad hook": _grad_hook, "forward hook": _forward_hook, "forward pre-hook": _pre_hook,
           "append a layer": _append}


@fuzz_settings(4)
@given(n=st.integers(1, 6), d=st.integers(1, 4), h=st.integers(1, 6), c=st.integers(2, 3),
       update=st.sampled_from(sorted(UPDATES)), plan=st.lists(st.sampled_from(sorted(CHANGES) + ["remove", "none"]),
                                                               min_size=3, max_size=3),
       seed=st.integers(0, 2**16))
def test_fuzz_step_with_changes(n, d, h, c, update, plan, seed):
    rng = np.random.default_rng(seed)
    x = dj.from_numpy(rng.standard_normal((n, d)).astype(np.float32))
    y = dj.from_numpy(rng.integers(0, c, n))
    runs = []
    for _ in range(3):
        dj.manual_seed(seed)
        model = nn.Sequential(nn.Linear(d, h), nn.Tanh(), nn.Linear(h, c))
        opt = UPDATES[update](model.parameters()) if UPDATES[update] else None
        runs.append((model, opt, _step_of(model, opt, LOSSES["cross_entropy"], "before")))
    (cm, co, cstep), (em, eo, estep), (lm, lo, lstep) = runs
    compiled = dj.compile(cstep)
    handles = []
    for k, change in enumerate(["none"] + plan):
        if change == "remove" and handles:
            for handle in handles.pop(int(rng.integers(len(handles)))):
                handle.remove()
        elif change in CHANGES:
            make = CHANGES[change](cm, rng, seed + k + 1)
            made = [make(m) for m in (cm, em, lm)]
            if made[0] is not None:
                handles.append(made)
        what = f"{update}, changes {plan}: step {k} (after {change!r})"
        want = estep(x, y, None).numpy()
        with dj.execution_mode("compiled"):
            lazy = lstep(x, y, None)
        assert_same(lazy.numpy(), want, f"{what}: compiled mode's loss")
        _check(compiled(x, y, None).numpy(), want, f"{what}: loss")
        for (m, o, check, how) in ((cm, co, _check, "whole step"), (lm, lo, assert_same, "compiled mode")):
            _compare(m, o, em, eo, check, f"{what}, {how}")


# the parameters an optimizer must not trust, and complex ones (issue 25): per example one parameter
# of the drawn dtype (a complex one is updated as its real view, as PyTorch's) and a float32 one, in
# one group or two, and what the example does to the first: make it read-only, resize it (``.data =``)
# while its ``.grad`` keeps the old shape and step once more, or try to assign it a gradient of
# another shape between steps
EDGES = ("none", "read-only", "resized", "wrong-shape grad")
DTYPES = {"float32": np.float32, "complex64": np.complex64, "complex128": np.complex128}
ADAM_TWINS = {"adam": ("Adam", dict(lr=0.01)), "adam-amsgrad-wd": ("Adam", dict(lr=0.01, weight_decay=0.05, amsgrad=True)),
              "adamw": ("AdamW", dict(lr=0.01, betas=(0.8, 0.9)))}


def _edge_run(how, start, x, update, split, edge, steps=3):
    """``steps`` steps of ``update`` in ``how`` (eager, compile or compiled), ``edge`` done to the first
    parameter; the parameters, and the error that stopped the steps (None if none did)."""
    w0 = start.copy()
    if edge == "read-only":
        w0.flags.writeable = False
        w = dj.from_numpy(w0).requires_grad_(True)
    else:
        w = dj.nn.Parameter(dj.tensor(w0))
    b = dj.nn.Parameter(dj.tensor(np.linspace(-1, 1, 3, dtype=np.float32)))
    opt = UPDATES[update]([{"params": [w]}, {"params": [b]}] if split else [w, b])
    xt = dj.tensor(x)

    def step():
        opt.zero_grad()
        loss = dj.real(w * xt).sum() + (b * b).sum()
        loss.backward()
        opt.step()
        return loss
    f = dj.compile(step) if how == "compile" else step
    error = None
    for k in range(steps):
        with dj.execution_mode("compiled" if how == "compiled" else "eager"):
            run = f
            if k == steps - 1 and edge == "resized":
                # after the last step's backward: .grad keeps the old shape, and the step only updates
                w.data = dj.zeros(start.size + 1, dtype=w.dtype)
                run = dj.compile(lambda: opt.step()) if how == "compile" else opt.step
            if k == steps - 1 and edge == "wrong-shape grad":
                with pytest.raises(AutogradError, match="attempting to assign a gradient of size"):
                    w.grad = dj.zeros(start.size + 1, dtype=w.dtype)
            try:
                run()
            except (ShapeError, AutogradError) as e:
                error = e
                break
    return [w.detach().numpy().copy(), b.detach().numpy().copy()], error


@fuzz_settings(8)
@given(shape=st.sampled_from([(3,), (2, 3), (1,)]), dtype=st.sampled_from(sorted(DTYPES)),
       update=st.sampled_from(sorted(k for k in UPDATES if UPDATES[k])), split=st.booleans(),
       edge=st.sampled_from(EDGES), seed=st.integers(0, 2**16))
def test_fuzz_complex_read_only_and_wrong_shape_gradients(shape, dtype, update, split, edge, seed):
    """Eager, a whole step under @dj.compile and compiled mode give the same parameters (compiled
    mode and complex ones bit for bit), or raise the same error before the step writes anything;
    complex Adam and AdamW against PyTorch's where it is installed."""
    rng = np.random.default_rng(seed)
    dt = DTYPES[dtype]
    start, x = rng.standard_normal(shape), rng.standard_normal(shape)
    if dt is not np.float32:
        start, x = start + 1j * rng.standard_normal(shape), x + 1j * rng.standard_normal(shape)
    start, x = start.astype(dt), x.astype(dt)
    what = f"{dtype} {shape}, {update}, {'two groups' if split else 'one group'}, {edge}"
    want, err = _edge_run("eager", start, x, update, split, edge)
    for how in ("compile", "compiled"):
        got, gerr = _edge_run(how, start, x, update, split, edge)
        assert type(gerr) is type(err) and str(gerr) == str(err), f"{what}: {how} raised {gerr!r}, eager {err!r}"
        for a, b in zip(got, want):
            (assert_same if how == "compiled" or dt is not np.float32 else _check)(a, b, f"{what}: {how}")
    if edge == "read-only":
        assert isinstance(err, ShapeError) and "read-only" in str(err), what
        np.testing.assert_array_equal(want[0], start, err_msg=what)      # refused before any write
    elif edge == "resized":
        assert isinstance(err, AutogradError) and "has shape" in str(err), what
        assert not want[0].any(), what
    else:
        assert err is None, what
        if dt is not np.float32:
            assert (want[0].imag != start.imag).all(), what            # the imaginary part moves too
    if torch is None or dt is np.float32 or update not in ADAM_TWINS or err is not None:
        return
    name, kw = ADAM_TWINS[update]
    tw = torch.tensor(start, requires_grad=True)
    tb = torch.tensor(np.linspace(-1, 1, 3, dtype=np.float32), requires_grad=True)
    topt = getattr(torch.optim, name)([{"params": [tw]}, {"params": [tb]}] if split else [tw, tb], foreach=False,
                                      **kw)
    for _ in range(3):
        topt.zero_grad()
        (torch.real(tw * torch.tensor(x)).sum() + (tb * tb).sum()).backward()
        topt.step()
    tol = dict(rtol=1e-5, atol=1e-6) if dt is np.complex64 else dict(rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(want[0], tw.detach().numpy(), **tol, err_msg=what)
