"""dj.optim.lr_scheduler: the learning rates over N epochs equal PyTorch's exactly (when installed) and
their closed forms (always); initial_lr, get_last_lr, state_dict round trips, momentum cycling,
errors, and signatures against PyTorch's."""

import inspect
import math

import pytest

import dispatch_jit as dj
from dispatch_jit.errors import InvalidArgumentError
from dispatch_jit.optim import lr_scheduler as S

EPOCHS = 25


def _dj_opt(cls=None, groups=2, **kw):
    ps = [dj.nn.Parameter(dj.ones(1)) for _ in range(groups)]
    cls = cls or dj.optim.SGD
    return cls([{"params": [p], "lr": 0.1 * (i + 1)} for i, p in enumerate(ps)], **kw)


def _torch_opt(torch, name="SGD", groups=2, **kw):
    ps = [torch.nn.Parameter(torch.ones(1)) for _ in range(groups)]
    return getattr(torch.optim, name)([{"params": [p], "lr": 0.1 * (i + 1)} for i, p in enumerate(ps)], **kw)


def _run(sched_fn, opt, metrics=None, epochs=EPOCHS):
    sched = sched_fn(opt)
    out = [list(sched.get_last_lr())]
    for e in range(epochs):
        opt.step()
        sched.step() if metrics is None else sched.step(metrics[e])
        out.append(list(sched.get_last_lr()))
        out.append([g["lr"] for g in opt.param_groups])
    return out, sched


# (name, kwargs, optimizer kwargs, optimizer name)
CASES = [
    ("StepLR", dict(step_size=3, gamma=0.5), {}, "SGD"),
    ("MultiStepLR", dict(milestones=[2, 5, 5, 11], gamma=0.3), {}, "SGD"),
    ("ExponentialLR", dict(gamma=0.9), {}, "SGD"),
    ("CosineAnnealingLR", dict(T_max=7, eta_min=0.001), {}, "SGD"),
    ("CosineAnnealingLR", dict(T_max=10), {}, "SGD"),
    ("LinearLR", dict(start_factor=0.25, total_iters=6), {}, "SGD"),
    ("LinearLR", dict(start_factor=0.5, end_factor=0.1, total_iters=4), {}, "SGD"),
    ("OneCycleLR", dict(max_lr=1.0, total_steps=EPOCHS), dict(momentum=0.9), "SGD"),
    ("OneCycleLR", dict(max_lr=[1.0, 0.5], epochs=5, steps_per_epoch=5, anneal_strategy="linear",
                        three_phase=True), dict(momentum=0.9), "SGD"),
    ("OneCycleLR", dict(max_lr=0.01, total_steps=EPOCHS, pct_start=0.25), {}, "Adam"),
]


@pytest.mark.parametrize("name,kw,okw,oname", CASES)
def test_lr_sequence_equals_torch(name, kw, okw, oname):
    torch = pytest.importorskip("torch")
    mine, ms = _run(lambda o: getattr(S, name)(o, **kw), _dj_opt(getattr(dj.optim, oname), **okw))
    theirs, ts = _run(lambda o: getattr(torch.optim.lr_scheduler, name)(o, **kw), _torch_opt(torch, oname, **okw))
    assert mine == theirs                   # floats, exactly
    assert ms.last_epoch == ts.last_epoch
    for mg, tg in zip(ms.optimizer.param_groups, ts.optimizer.param_groups):
        assert mg["initial_lr"] == tg["initial_lr"]
        for k in ("momentum", "betas"):
            if k in tg:
                assert mg[k] == tg[k]


def test_lambda_and_sequential_equal_torch():
    torch = pytest.importorskip("torch")
    lam = [lambda e: 0.95 ** e, lambda e: 1.0 / (e + 1)]
    a, _ = _run(lambda o: S.LambdaLR(o, lam), _dj_opt())
    b, _ = _run(lambda o: torch.optim.lr_scheduler.LambdaLR(o, lam), _torch_opt(torch))
    assert a == b

    def seq(mod):
        return lambda o: mod.SequentialLR(o, [mod.LinearLR(o, start_factor=0.1, total_iters=4),
                                              mod.CosineAnnealingLR(o, T_max=8),
                                              mod.StepLR(o, step_size=2)], milestones=[4, 12])
    a, _ = _run(seq(S), _dj_opt())
    b, _ = _run(seq(torch.optim.lr_scheduler), _torch_opt(torch))
    assert a == b


@pytest.mark.parametrize("kw", [dict(patience=2), dict(mode="max", factor=0.5, patience=1, cooldown=2,
                                                      threshold_mode="abs", threshold=0.05, min_lr=[0.02, 0.0])])
def test_reduce_on_plateau_equals_torch(kw):
    torch = pytest.importorskip("torch")
    metrics = [1.0, 0.9, 0.95, 0.95, 0.96, 0.7, 0.71, 0.72, 0.73, 0.74] * 3
    a, ms = _run(lambda o: S.ReduceLROnPlateau(o, **kw), _dj_opt(), metrics)
    b, ts = _run(lambda o: torch.optim.lr_scheduler.ReduceLROnPlateau(o, **kw), _torch_opt(torch), metrics)
    assert a == b
    assert (ms.best, ms.num_bad_epochs, ms.cooldown_counter) == (ts.best, ts.num_bad_epochs, ts.cooldown_counter)


def test_closed_forms_without_torch():
    opt = _dj_opt(groups=1)
    s = S.CosineAnnealingLR(opt, T_max=6, eta_min=0.01)
    for e in range(1, 7):
        opt.step(); s.step()
        assert math.isclose(s.get_last_lr()[0], 0.01 + 0.09 * (1 + math.cos(math.pi * e / 6)) / 2, rel_tol=1e-12)
    opt = _dj_opt(groups=1)
    s = S.StepLR(opt, step_size=2, gamma=0.5)
    got = []
    for _ in range(5):
        opt.step(); s.step(); got.append(s.get_last_lr()[0])
    assert got == [0.1 * 0.5 ** (e // 2) for e in range(1, 6)]


def test_initial_lr_resume_and_state_dict():
    opt = _dj_opt()
    s = S.ExponentialLR(opt, gamma=0.5)
    assert [g["initial_lr"] for g in opt.param_groups] == [0.1, 0.2]
    for _ in range(3):
        opt.step(); s.step()
    sd = s.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 3 and sd["base_lrs"] == [0.1, 0.2]
    opt2 = _dj_opt()
    opt2.load_state_dict(opt.state_dict())       # carries "initial_lr" and the current "lr"
    s2 = S.ExponentialLR(opt2, gamma=0.5, last_epoch=2)
    s2.load_state_dict(sd)
    opt.step(); s.step(); opt2.step(); s2.step()
    assert s2.get_last_lr() == s.get_last_lr() == [0.1 * 0.5 ** 4, 0.2 * 0.5 ** 4]
    with pytest.raises(InvalidArgumentError, match="initial_lr"):
        S.StepLR(_dj_opt(), step_size=1, last_epoch=3)


def test_sequential_state_dict_round_trip():
    opt = _dj_opt(groups=1)
    s = S.SequentialLR(opt, [S.ExponentialLR(opt, 0.5), S.StepLR(opt, 1)], milestones=[2])
    for _ in range(3):
        opt.step(); s.step()
    sd = s.state_dict()
    assert len(sd["_schedulers"]) == 2 and "optimizer" not in sd["_schedulers"][0]
    opt2 = _dj_opt(groups=1)
    s2 = S.SequentialLR(opt2, [S.ExponentialLR(opt2, 0.5), S.StepLR(opt2, 1)], milestones=[2])
    s2.load_state_dict(sd)
    opt2.param_groups[0]["lr"] = opt.param_groups[0]["lr"]
    opt.step(); s.step(); opt2.step(); s2.step()
    assert s.get_last_lr() == s2.get_last_lr()


def test_errors_and_warnings():
    with pytest.raises(TypeError, match="is not an Optimizer"):
        S.StepLR(object(), step_size=1)
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        S.ReduceLROnPlateau(_dj_opt(), factor=1.0)
    with pytest.raises(ValueError, match="total_steps OR"):
        S.OneCycleLR(_dj_opt(), max_lr=1.0)
    with pytest.raises(ValueError, match="must support momentum"):
        S.OneCycleLR(dj.optim.Adagrad([dj.nn.Parameter(dj.ones(1))]), max_lr=1.0, total_steps=3)
    opt = _dj_opt(momentum=0.9)
    s = S.OneCycleLR(opt, max_lr=1.0, total_steps=2)
    opt.step(); s.step(); opt.step(); s.step()
    with pytest.raises(ValueError, match="Tried to step 3 times"):
        opt.step(); s.step()
    with pytest.raises(ValueError, match="one more than the number of milestone"):
        o = _dj_opt()
        S.SequentialLR(o, [S.StepLR(o, 1)], milestones=[1])
    o = _dj_opt()
    s = S.StepLR(o, 1)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        s.step()


def test_signatures_match_torch():
    torch = pytest.importorskip("torch")
    for name in S.__all__:
        mine = inspect.signature(getattr(S, name).__init__)
        theirs = inspect.signature(getattr(torch.optim.lr_scheduler, name).__init__)
        assert [(p.name, p.default, p.kind) for p in mine.parameters.values()] == \
            [(p.name, p.default, p.kind) for p in theirs.parameters.values()], name
