"""An optimizer's numbers are runtime scalars of a compiled whole step (compiler/training/whole_step.py,
training/functionalize.py): a learning-rate schedule (or any change of momentum, dampening, weight decay,
betas, eps) runs the one traced plan, and every step equals the eager twin's to the bit.
The model is elementwise (no matmul, whose compiled form may round as NumPy's dot where eager's
takes its own loop nest), so that bits can be compared; tests/fuzz/test_fuzz_step.py runs
schedules on MLPs."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit import nn
from dispatch_jit.compiler.training.whole_step import StepEntry
from dispatch_jit.tensor import version_of

RNG = np.random.default_rng(7)
X = dj.from_numpy(RNG.standard_normal((16, 5)).astype(np.float32))
T = dj.from_numpy(RNG.standard_normal((16, 5)).astype(np.float32))


class _Scale(nn.Module):
    """``tanh(x * w + b)``: an elementwise model, a weight and a bias per element (of the same shape
    as x: no view in the gradients, so the plan is one compiled function)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(dj.from_numpy(np.linspace(-1.0, 1.5, 80, dtype=np.float32).reshape(16, 5)))
        self.b = nn.Parameter(dj.from_numpy(np.full((16, 5), 0.25, np.float32)))

    def forward(self, x):
        return dj.tanh(x * self.w + self.b)


def _step_of(m, opt):
    def step(x, t):
        opt.zero_grad()
        loss = ((m(x) - t) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    return step


def _same(cm, em, co, eo, what):
    for i, (p, q) in enumerate(zip(cm.parameters(), em.parameters())):
        np.testing.assert_array_equal(p.numpy(), q.numpy(), err_msg=f"{what}: parameter {i}")
        assert version_of(p) == version_of(q), what
        sc, se = co.state[p], eo.state[q]
        assert sorted(sc) == sorted(se), what
        for k in sc:
            if isinstance(sc[k], dj.Tensor):
                np.testing.assert_array_equal(sc[k].numpy(), se[k].numpy(), err_msg=f"{what}: state {k} of {i}")
            else:
                assert sc[k] == se[k], what


# optimizer -> (its constructor, a schedule: step k -> the options to set before it)
SCHEDULES = {
    "sgd-momentum": (lambda ps: dj.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01),
                     lambda k: dict(lr=0.1 * 0.7 ** k, momentum=0.9 - 0.05 * k, dampening=0.02 * k,
                                    weight_decay=0.01 + 0.003 * k)),
    "sgd-nesterov": (lambda ps: dj.optim.SGD(ps, lr=0.05, momentum=0.8, nesterov=True),
                     lambda k: dict(lr=0.05 / (1 + k), momentum=0.8 + 0.01 * k)),
    "adam": (lambda ps: dj.optim.Adam(ps, lr=0.01, weight_decay=0.1),
             lambda k: dict(lr=0.01 * 0.5 ** k, betas=(0.9 - 0.02 * k, 0.999 - 0.001 * k), eps=1e-8 * (k + 1),
                            weight_decay=0.1 / (k + 1))),
    "adamw-amsgrad": (lambda ps: dj.optim.AdamW(ps, lr=0.02, amsgrad=True),
                      lambda k: dict(lr=0.02 * (1 + k) / 8, betas=(0.8, 0.99 - 0.01 * k), weight_decay=0.01 * k + 0.01)),
}


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_a_schedule_runs_one_plan_to_the_bit(name):
    make, schedule = SCHEDULES[name]
    (cm, co), (em, eo) = [(m, make(m.parameters())) for m in (_Scale(), _Scale())]
    compiled, eager = dj.compile(_step_of(cm, co)), _step_of(em, eo)
    for k in range(6):
        for opt in (co, eo):
            opt.param_groups[0].update(schedule(k))
        np.testing.assert_array_equal(compiled(X, T).numpy(), eager(X, T).numpy(), err_msg=f"{name} step {k}: loss")
        _same(cm, em, co, eo, f"{name} step {k}")
    entry = compiled._last
    assert isinstance(entry, StepEntry), compiled.explain()
    # the first step makes the optimizer's state eagerly; then one trace for every value
    assert entry.traces == 2 and not entry.last_reason, compiled.explain()
    (variant,) = [v for v in entry.variants.values() if v.__class__ is not str]
    assert variant.runs == 5 and variant.plan.function is not None, compiled.explain()
    assert "optimizer option(s)" in compiled.explain() and "keyed by value" not in compiled.explain()


def _lr(opt):
    # read in a helper: an attribute chain in the compiled function's own code (``opt.param_groups``)
    # is guarded by value by dj.compile itself (guards.py), before the step's entry is reached
    return opt.param_groups[0]["lr"]


def test_a_hand_written_update_reads_the_learning_rate_per_call():
    """``p -= lr * p.grad`` with ``lr`` read from the optimizer's group: a runtime scalar too."""
    def step_of(m, opt):
        def step(x, t):
            ((m(x) - t) ** 2).mean().backward()
            with dj.no_grad():
                for p in m.parameters():
                    p -= _lr(opt) * p.grad
                    p.grad = None
        return step
    (cm, co), (em, eo) = [(m, dj.optim.SGD(m.parameters(), lr=0.1)) for m in (_Scale(), _Scale())]
    compiled, eager = dj.compile(step_of(cm, co)), step_of(em, eo)
    for k in range(4):
        for opt in (co, eo):
            opt.param_groups[0]["lr"] = 0.1 + 0.05 * k
        compiled(X, T), eager(X, T)
        for p, q in zip(cm.parameters(), em.parameters()):
            np.testing.assert_array_equal(p.numpy(), q.numpy(), err_msg=f"step {k}")
    assert compiled._last.traces == 1 and compiled.cache_info().traces == 1, compiled.explain()


def test_an_option_used_in_python_is_keyed_by_value():
    """``lr * 0.5`` computed in Python is a constant of the trace: options are then keyed by value,
    and each new value traces again (correct, not one plan)."""
    def step_of(m, opt):
        def step(x, t):
            opt.zero_grad()
            ((m(x) - t) ** 2).mean().backward()
            half = _lr(opt) * 0.5
            with dj.no_grad():
                for p in m.parameters():
                    p -= half * p.grad
        return step
    (cm, co), (em, eo) = [(m, dj.optim.SGD(m.parameters(), lr=0.1)) for m in (_Scale(), _Scale())]
    compiled, eager = dj.compile(step_of(cm, co)), step_of(em, eo)
    for k in range(4):
        for opt in (co, eo):
            opt.param_groups[0]["lr"] = 0.1 * (k // 2 + 1)
        compiled(X, T), eager(X, T)
        for p, q in zip(cm.parameters(), em.parameters()):
            np.testing.assert_array_equal(p.numpy(), q.numpy(), err_msg=f"step {k}")
    entry = compiled._last
    text = compiled.explain()
    assert entry.by_value and "keyed by value" in text and "'lr'" in text and "__mul__" in text, text
    # (lr 0.1, no .grad yet), (0.1, .grad set), (0.2, .grad set); plus the trace that found the read
    assert len([v for v in entry.variants.values() if v.__class__ is not str]) == 3, text
    assert entry.traces == 4, text
