"""dj.optim.RMSprop and Adagrad: parameters after several steps against PyTorch (when installed) and
against the formulas in NumPy (always); state layout; state_dict round trip; errors; signatures."""

import inspect

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import DTypeError, InvalidArgumentError

SHAPES = [(3, 2), (4,)]
STEPS = 5


def _init(dtype):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype(dtype) for s in SHAPES]


def _grads(k, dtype):
    rng = np.random.default_rng(100 + k)
    return [rng.standard_normal(s).astype(dtype) for s in SHAPES]


def _run_dj(name, kw, dtype=np.float32):
    params = [dj.nn.Parameter(dj.tensor(a)) for a in _init(dtype)]
    opt = getattr(dj.optim, name)(params, **kw)
    for k in range(STEPS):
        for p, g in zip(params, _grads(k, dtype)):
            p.grad = dj.tensor(g)
        opt.step()
    return [p.detach().numpy().copy() for p in params], opt


def _run_torch(torch, name, kw, dtype=np.float32, foreach=False):
    params = [torch.tensor(a, requires_grad=True) for a in _init(dtype)]
    opt = getattr(torch.optim, name)(params, foreach=foreach, **kw)
    for k in range(STEPS):
        for p, g in zip(params, _grads(k, dtype)):
            p.grad = torch.tensor(g)
        opt.step()
    return [p.detach().numpy() for p in params], opt


def _rmsprop_np(kw, dtype):
    lr, alpha, eps = kw.get("lr", 0.01), kw.get("alpha", 0.99), kw.get("eps", 1e-8)
    wd, mom, centered, maximize = kw.get("weight_decay", 0), kw.get("momentum", 0), kw.get("centered", False), \
        kw.get("maximize", False)
    out = []
    for i, p in enumerate(_init(dtype)):
        p = p.astype(np.float64)
        v, m, b = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)
        for k in range(STEPS):
            g = _grads(k, dtype)[i].astype(np.float64) * (-1 if maximize else 1) + wd * p
            v = alpha * v + (1 - alpha) * g * g
            if centered:
                m = m + (1 - alpha) * (g - m)
                avg = np.sqrt(v - m * m) + eps
            else:
                avg = np.sqrt(v) + eps
            if mom > 0:
                b = mom * b + g / avg
                p = p - lr * b
            else:
                p = p - lr * g / avg
        out.append(p)
    return out


def _adagrad_np(kw, dtype):
    lr, lr_decay, wd, init, eps = kw.get("lr", 0.01), kw.get("lr_decay", 0), kw.get("weight_decay", 0), \
        kw.get("initial_accumulator_value", 0), kw.get("eps", 1e-10)
    out = []
    for i, p in enumerate(_init(dtype)):
        p = p.astype(np.float64)
        s = np.full_like(p, init)
        for k in range(STEPS):
            g = _grads(k, dtype)[i].astype(np.float64) * (-1 if kw.get("maximize") else 1) + wd * p
            s = s + g * g
            p = p - lr / (1 + k * lr_decay) * g / (np.sqrt(s) + eps)
        out.append(p)
    return out


CASES = [
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, momentum=0.9, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.005, alpha=0.9, centered=True, momentum=0.5, maximize=True, eps=1e-6)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.01, initial_accumulator_value=0.5)),
    ("Adagrad", dict(lr=0.2, eps=1e-6, maximize=True)),
]
TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,kw", CASES)
def test_against_numpy(name, kw, dtype):
    got, _ = _run_dj(name, kw, dtype)
    want = (_rmsprop_np if name == "RMSprop" else _adagrad_np)(kw, dtype)
    tol = TOL[dtype] if dtype == np.float64 else dict(rtol=1e-4, atol=1e-5)
    for a, b in zip(got, want):
        assert a.dtype == dtype
        np.testing.assert_allclose(a, b, **tol)


@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("name,kw", CASES)
def test_against_torch(name, kw, foreach):
    torch = pytest.importorskip("torch")
    got, opt = _run_dj(name, dict(kw, foreach=foreach))
    want, topt = _run_torch(torch, name, kw, foreach=foreach)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, **TOL[np.float32])
    mine = opt.state_dict()
    theirs = topt.state_dict()
    assert mine["param_groups"] == theirs["param_groups"]
    for i in theirs["state"]:
        assert sorted(mine["state"][i]) == sorted(theirs["state"][i])
        for k, v in theirs["state"][i].items():
            assert mine["state"][i][k].dtype == getattr(dj, str(v.dtype).removeprefix("torch."))
            np.testing.assert_allclose(mine["state"][i][k].numpy(), v.numpy(), **TOL[np.float32])


def test_state_dict_round_trip_continues_identically():
    for name, kw in (CASES[2], CASES[4]):
        _, opt = _run_dj(name, kw)
        params = [dj.nn.Parameter(p.detach().clone()) for p in opt.param_groups[0]["params"]]
        opt2 = getattr(dj.optim, name)(params, **kw)
        opt2.load_state_dict(opt.state_dict())
        for a, b in ((opt.param_groups[0]["params"], opt), (params, opt2)):
            for p, g in zip(a, _grads(9, np.float32)):
                p.grad = dj.tensor(g)
            b.step()
        for p, q in zip(opt.param_groups[0]["params"], params):
            np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())


def test_adagrad_state_made_at_construction_and_for_added_groups():
    w, v = dj.nn.Parameter(dj.ones(2)), dj.nn.Parameter(dj.ones(3))
    opt = dj.optim.Adagrad([w], initial_accumulator_value=0.25)
    assert opt.state[w]["sum"].tolist() == [0.25, 0.25] and opt.state[w]["step"].item() == 0.0
    opt.add_param_group({"params": [v], "initial_accumulator_value": 1.0})
    assert opt.state[v]["sum"].tolist() == [1.0, 1.0, 1.0]
    assert len(opt.state_dict()["state"]) == 2


def test_only_params_with_grads_step_and_versions_bump():
    w, v = dj.nn.Parameter(dj.ones(2)), dj.nn.Parameter(dj.ones(2))
    opt = dj.optim.RMSprop([w, v], lr=0.1)
    w.grad = dj.ones(2)
    y = (w * w).sum()          # saves w
    opt.step()                 # writes w in place
    assert v.tolist() == [1.0, 1.0] and v not in opt.state and opt.state[w]["step"].item() == 1.0
    with pytest.raises(dj.errors.AutogradError, match="modified by an inplace operation"):
        y.backward()


def test_errors():
    w = dj.nn.Parameter(dj.ones(1))
    with pytest.raises(InvalidArgumentError, match="Invalid alpha value: -1"):
        dj.optim.RMSprop([w], alpha=-1)
    with pytest.raises(ValueError, match="Invalid momentum value"):
        dj.optim.RMSprop([w], momentum=-0.1)
    with pytest.raises(ValueError, match="Invalid lr_decay value"):
        dj.optim.Adagrad([w], lr_decay=-1)
    with pytest.raises(ValueError, match="Invalid initial_accumulator_value"):
        dj.optim.Adagrad([w], initial_accumulator_value=-1)
    with pytest.raises(InvalidArgumentError, match="capturable=True is not supported"):
        dj.optim.RMSprop([w], capturable=True)
    with pytest.raises(InvalidArgumentError, match="fused=True is not supported"):
        dj.optim.Adagrad([w], fused=True)
    z = dj.nn.Parameter(dj.ones(2, dtype=dj.complex64))
    opt = dj.optim.Adagrad([z])
    z.grad = dj.ones(2, dtype=dj.complex64)
    with pytest.raises(DTypeError, match="parameter 0 is complex"):
        opt.step()


def test_closure_and_signatures():
    torch = pytest.importorskip("torch")
    w = dj.nn.Parameter(dj.tensor([3.0]))
    opt = dj.optim.RMSprop([w])

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss
    assert opt.step(closure).item() == 9.0
    for name in ("RMSprop", "Adagrad"):
        mine = inspect.signature(getattr(dj.optim, name).__init__).parameters.values()
        theirs = inspect.signature(getattr(torch.optim, name).__init__).parameters.values()
        assert [(p.name, p.default, p.kind) for p in mine] == [(p.name, p.default, p.kind) for p in theirs]
