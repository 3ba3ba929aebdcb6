"""dj.optim: SGD, Adam and AdamW against PyTorch over several steps (when installed) and against their
formulas in NumPy; one loop per dtype; the per-tensor form (what compiled mode records) equal bit for
bit to the loop; version counters; state_dict; errors."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import AutogradError, SchemaError
from dispatch_jit.jit import cache
from dispatch_jit.kernels.optim import foreach

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")
SHAPES = [(4, 3), (4,), (2, 4)]


def _init(dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in SHAPES]


def _grads(step, dtype):
    rng = np.random.default_rng(100 + step)
    return [rng.standard_normal(s).astype(dtype) for s in SHAPES]


def _run_dj(cls, kw, dtype, steps=4, mode=None):
    params = [dj.nn.Parameter(dj.tensor(a)) for a in _init(dtype)]
    opt = cls(params, **kw)
    for k in range(steps):
        for p, g in zip(params, _grads(k, dtype)):
            p.grad = dj.tensor(g)
        if mode is None:
            opt.step()
        else:
            with dj.execution_mode(mode):
                opt.step()
    return [p.detach().numpy().copy() for p in params], opt


def _run_torch(name, kw, dtype, steps=4):
    params = [torch.tensor(a, requires_grad=True) for a in _init(dtype)]
    opt = getattr(torch.optim, name)(params, foreach=False, **kw)
    for k in range(steps):
        for p, g in zip(params, _grads(k, dtype)):
            p.grad = torch.tensor(g)
        opt.step()
    return [p.detach().numpy() for p in params]


CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.5, dampening=0.3, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, amsgrad=True)),
    ("Adam", dict(lr=0.01, maximize=True, eps=1e-6)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.02, weight_decay=0.3, amsgrad=True)),
]


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,kw", CASES)
def test_optimizers_match_torch_over_steps(name, kw, dtype):
    ours, _ = _run_dj(getattr(dj.optim, name), kw, dtype)
    theirs = _run_torch(name, kw, dtype)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, **tol)


def test_sgd_momentum_against_its_formula():
    ours, _ = _run_dj(dj.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=0.01), np.float64, steps=3)
    ps, bufs = _init(np.float64), None
    for k in range(3):
        d = [g + 0.01 * p for g, p in zip(_grads(k, np.float64), ps)]
        bufs = d if bufs is None else [0.9 * b + dd for b, dd in zip(bufs, d)]
        ps = [p - 0.1 * b for p, b in zip(ps, bufs)]
    for a, b in zip(ours, ps):
        np.testing.assert_allclose(a, b, rtol=1e-13)


@pytest.mark.parametrize("name,kw", [CASES[2], CASES[3], CASES[5], CASES[8]])
def test_the_per_tensor_form_equals_the_loop_bit_for_bit(name, kw):
    """What @dj.compile and the compiled mode run (dispatch_jit ops, recorded and fused) gives the same bits
    as the eager multi-tensor loop."""
    cls = getattr(dj.optim, name)
    eager, _ = _run_dj(cls, kw, np.float32)
    lazy, _ = _run_dj(cls, kw, np.float32, mode="compiled")
    for a, b in zip(eager, lazy):
        assert np.array_equal(a, b)


def test_one_loop_per_dtype_compiled_once_per_bucket():
    before = cache.size("optim")
    _run_dj(dj.optim.SGD, dict(lr=0.1, momentum=0.9), np.float32, steps=2)
    after_first = cache.size("optim")
    params = [dj.nn.Parameter(dj.randn(3)) for _ in range(4)]    # 4 tensors: the same bucket as 3
    opt = dj.optim.SGD(params, lr=0.1, momentum=0.9)
    for p in params:
        p.grad = dj.ones(3)
    opt.step()
    assert cache.size("optim") == after_first <= before + 1
    assert foreach.bucket(3) == foreach.bucket(4) == 4 and foreach.bucket(5) == 8 and foreach.bucket(1) == 1


def test_step_bumps_versions_so_saved_tensors_are_checked():
    w = dj.nn.Parameter(dj.tensor([1.0, 2.0]))
    opt = dj.optim.SGD([w], lr=0.1)
    (w * w).sum().backward()
    y = (w * w).sum()          # saves w
    opt.step()                 # writes w in place
    with pytest.raises(AutogradError, match="modified by an inplace operation"):
        y.backward()


def test_zero_grad_and_param_groups_and_state_dict():
    a, b = dj.nn.Parameter(dj.ones(2)), dj.nn.Parameter(dj.ones(3))
    opt = dj.optim.Adam([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    (a.sum() + b.sum()).backward()
    opt.step()
    opt.zero_grad(set_to_none=False)
    assert a.grad.numpy().tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert a.grad is None
    sd = opt.state_dict()
    assert sd["param_groups"][1]["params"] == [1] and sd["state"][0]["step"] == 1
    opt2 = dj.optim.Adam([{"params": [dj.nn.Parameter(dj.ones(2))]}, {"params": [dj.nn.Parameter(dj.ones(3))]}])
    opt2.load_state_dict(sd)
    assert opt2.param_groups[1]["lr"] == 0.5
    p0 = opt2.param_groups[0]["params"][0]
    assert np.array_equal(opt2.state[p0]["exp_avg"].numpy(), opt.state[a]["exp_avg"].numpy())
    assert opt2.state[p0]["exp_avg"] is not opt.state[a]["exp_avg"]
    with pytest.raises(SchemaError, match="parameter group"):
        dj.optim.SGD([dj.nn.Parameter(dj.ones(2))]).load_state_dict(sd)


def test_optimizer_errors():
    with pytest.raises(SchemaError, match="empty parameter list"):
        dj.optim.SGD([])
    with pytest.raises(SchemaError, match="Nesterov"):
        dj.optim.SGD([dj.nn.Parameter(dj.ones(1))], nesterov=True)
    with pytest.raises(SchemaError, match="Invalid beta"):
        dj.optim.Adam([dj.nn.Parameter(dj.ones(1))], betas=(1.0, 0.9))
    with pytest.raises(SchemaError, match="non-leaf"):
        dj.optim.SGD([dj.ones(1, requires_grad=True) * 2])
    p = dj.nn.Parameter(dj.ones(1))
    with pytest.raises(SchemaError, match="more than one"):
        dj.optim.SGD([{"params": [p]}, {"params": [p]}])
    with pytest.raises(SchemaError, match="iterable"):
        dj.optim.SGD(p)


def test_float16_and_cuda_take_the_per_tensor_form():
    p = dj.nn.Parameter(dj.ones(3, dtype=dj.float16))
    p.grad = dj.ones(3, dtype=dj.float16)
    dj.optim.SGD([p], lr=0.5, momentum=0.9).step()
    assert p.numpy().tolist() == [0.5, 0.5, 0.5]
    if dj.cuda.is_available():
        q = dj.nn.Parameter(dj.ones(3, device="cuda"))
        q.grad = dj.ones(3, device="cuda")
        dj.optim.Adam([q], lr=0.1).step()
        np.testing.assert_allclose(q.numpy(), 0.9, rtol=1e-6)


def _three_steps_doubling_after_one(lib, model, opt, x):
    """Three steps of ``opt`` on ``model`` (dj's or torch's, per ``lib``), ``model.double()`` after the first."""
    for step in range(3):
        if step == 1:
            model.double()
        opt.zero_grad()
        (model(lib.tensor(x.astype(np.float64 if step else np.float32))) ** 2).sum().backward()
        opt.step()


@pytest.mark.parametrize("name", ["SGD", "Adam"])
def test_a_step_after_model_double_keeps_the_old_state_dtype_and_runs(name):
    """After ``model.double()`` the state made before keeps its float32 (as PyTorch's); the
    multi-tensor loop takes one dtype, so such a group runs the per-tensor form (it crashed inside
    Numba).  SGD against torch, which runs this too (its Adam refuses the mixed dtypes)."""
    dj.manual_seed(0)
    m = dj.nn.Linear(3, 2)
    kw = dict(lr=0.1, momentum=0.9) if name == "SGD" else dict(lr=0.1)
    opt = getattr(dj.optim, name)(m.parameters(), **kw)
    x = np.random.default_rng(0).standard_normal((4, 3))
    start = [p.detach().numpy().copy() for p in m.parameters()]
    _three_steps_doubling_after_one(dj, m, opt, x)
    assert all(p.dtype == dj.float64 for p in m.parameters())
    assert all(v.dtype == dj.float32 for s in opt.state.values() for v in s.values() if isinstance(v, dj.Tensor)
               and v.ndim)
    torch = pytest.importorskip("torch")
    if name != "SGD":
        return
    tm = torch.nn.Linear(3, 2)
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(start[0]))
        tm.bias.copy_(torch.tensor(start[1]))
    _three_steps_doubling_after_one(torch, tm, torch.optim.SGD(tm.parameters(), **kw), x)
    np.testing.assert_allclose(m.weight.detach().numpy(), tm.weight.detach().numpy(), rtol=1e-6, atol=1e-7)
