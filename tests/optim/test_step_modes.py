"""Parameters after N optimizer steps, bit for bit the same in the three ways a step runs: eager,
``@dj.compile`` of the whole step (compiler/training/), and ``dj.execution_mode("compiled")``
(compiler/lazy/), for SGD, Adam and AdamW over several settings, float32 and float64, two
parameter groups.  The forward is elementwise with sums (no matmul, whose loop nest a plan may
pick differently), so every difference would be the update's.  The first step of each optimizer
makes its state (eager in every mode); the later ones are traced or recorded."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.compiler.lazy import lazy_info

X = np.linspace(-1.5, 2.0, 12).reshape(4, 3)

SETTINGS = {
    "sgd": lambda ps: dj.optim.SGD(ps, lr=0.1),
    "sgd-momentum-dampening-wd": lambda ps: dj.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.1,
                                                         weight_decay=0.01),
    "sgd-nesterov-maximize": lambda ps: dj.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, maximize=True),
    "adam": lambda ps: dj.optim.Adam(ps, lr=0.01),
    "adam-amsgrad-wd-maximize": lambda ps: dj.optim.Adam(ps, lr=0.01, betas=(0.8, 0.99), weight_decay=0.1,
                                                         amsgrad=True, maximize=True),
    "adamw": lambda ps: dj.optim.AdamW(ps, lr=0.01),
    "adamw-amsgrad": lambda ps: dj.optim.AdamW(ps, lr=0.02, eps=1e-6, weight_decay=0.3, amsgrad=True),
}


def _model(dtype):
    w = dj.nn.Parameter(dj.tensor((X * 0.5).astype(dtype)))
    b = dj.nn.Parameter(dj.tensor(np.arange(3, dtype=dtype) / 4))
    return w, b


def _run(how, setting, dtype, n=5):
    w, b = _model(dtype)
    # two groups, the second with its own learning rate
    opt = SETTINGS[setting]([{"params": [w]}, {"params": [b], "lr": 0.03}])
    x = dj.tensor(X.astype(dtype))

    def step(x):
        opt.zero_grad()
        loss = (dj.tanh(w * x) * w + b * b).sum()
        loss.backward()
        opt.step()
        return loss

    run = dj.compile(step) if how == "whole-step" else step
    for _ in range(n):
        if how == "compiled-mode":
            with dj.execution_mode("compiled"):
                run(x)
        else:
            run(x)
    states = [opt.state.get(p, {}) for p in (w, b)]
    state = [s[k].numpy().copy() for s in states for k in sorted(s) if isinstance(s[k], dj.Tensor)]
    steps = [s.get("step") for s in states]
    return [w.detach().numpy().copy(), b.detach().numpy().copy()] + state, steps, run


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("setting", list(SETTINGS))
def test_parameters_after_steps_equal_across_modes(setting, dtype):
    want, want_steps, _ = _run("eager", setting, dtype)
    before = lazy_info()["steps_recorded"]
    lazy, lazy_steps, _ = _run("compiled-mode", setting, dtype)
    assert lazy_info()["steps_recorded"] > before          # the update was recorded, not run eagerly
    whole, whole_steps, f = _run("whole-step", setting, dtype)
    assert "whole step compiled" in f.explain(), f.explain()
    assert lazy_steps == want_steps == whole_steps
    for i, (a, b, c) in enumerate(zip(want, lazy, whole)):
        assert a.dtype == b.dtype == c.dtype
        np.testing.assert_array_equal(b, a, err_msg=f"compiled mode, array {i}")
        np.testing.assert_array_equal(c, a, err_msg=f"whole step, array {i}")
