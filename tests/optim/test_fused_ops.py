"""The fused update ops (kernels/optim/fused.py): ``_fused_sgd_``, ``_fused_adam_``, ``_fused_adamw_``
over lists of parameters and state, in place.  Oracles: PyTorch's ops of the same names (CPU,
float64, to rounding: PyTorch's kernel orders its roundings its own way), the op's own two forms
against each other bit for bit (the multi-tensor loop and the per-tensor ops, which run for a
non-contiguous parameter), and compiled mode, which records the op (compiler/lazy/update.py)."""

import math

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.compiler.lazy import lazy_info
from dispatch_jit.errors import InvalidArgumentError
from dispatch_jit.tensor import version_of

A = dj.ops.aten
RNG = np.random.default_rng(3)
SHAPES = [(4, 3), (5,)]
ADAM = dict(lr=0.01, beta1=0.8, beta2=0.99, weight_decay=0.1, eps=1e-6)
SGD = dict(weight_decay=0.01, momentum=0.9, lr=0.1, dampening=0.0, nesterov=True)


def _arrays(n_state, dtype=np.float64):
    return [[RNG.standard_normal(s).astype(dtype) for s in SHAPES] for _ in range(2 + n_state)]


def _dj(lists, transpose=False):
    out = [[dj.tensor(a) for a in ts] for ts in lists]
    if transpose:       # a non-contiguous first parameter: the op takes its per-tensor form
        out[0][0] = dj.tensor(np.ascontiguousarray(lists[0][0].T)).T
    return out


def test_the_ops_are_inplace_ops_of_the_table():
    for name in ("_fused_sgd_", "_fused_adam_", "_fused_adamw_"):
        assert dj.Tag.inplace in getattr(A, name).default.tags


@pytest.mark.parametrize("name", ["_fused_adam_", "_fused_adamw_"])
@pytest.mark.parametrize("amsgrad, maximize", [(False, False), (True, True)])
def test_adam_equals_torch(name, amsgrad, maximize):
    torch = pytest.importorskip("torch")
    lists = _arrays(3)
    lists[3], lists[4] = [np.abs(a) for a in lists[3]], [np.abs(a) for a in lists[4]]     # squares: >= 0
    mine = _dj(lists)
    theirs = [[torch.tensor(a) for a in ts] for ts in lists]
    steps = [3.0, 7.0]
    kw = dict(ADAM, amsgrad=amsgrad, maximize=maximize)
    getattr(A, name)(*mine, steps, **kw)
    if not amsgrad:        # PyTorch's takes no max_exp_avg_sqs then (dj's ignores them)
        theirs[4] = []
    getattr(torch, name)(*theirs, [torch.tensor(t) for t in steps], **kw)
    for ts, us in zip(mine, theirs):
        for t, u in zip(ts, us):
            np.testing.assert_allclose(t.numpy(), u.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("first", [True, False])
def test_sgd_equals_torch(first):
    torch = pytest.importorskip("torch")
    lists = _arrays(1)
    mine = _dj(lists)
    theirs = [[torch.tensor(a) for a in ts] for ts in lists]
    A._fused_sgd_(*mine, **SGD, maximize=False, is_first_step=first)
    torch._fused_sgd_(*theirs, **SGD, maximize=False, is_first_step=first)
    for ts, us in zip(mine, theirs):
        for t, u in zip(ts, us):
            np.testing.assert_allclose(t.numpy(), u.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["_fused_sgd_", "_fused_adam_", "_fused_adamw_"])
def test_loop_and_per_tensor_forms_agree_bit_for_bit(name, dtype):
    sgd = name == "_fused_sgd_"
    lists = _arrays(1 if sgd else 3, dtype)
    if not sgd:
        lists[3], lists[4] = [np.abs(a) for a in lists[3]], [np.abs(a) for a in lists[4]]
    results = []
    for transpose in (False, True):
        ts = _dj(lists, transpose)
        versions = [version_of(t) for t in ts[0]]
        if sgd:
            A._fused_sgd_(*ts, **SGD, maximize=True, is_first_step=False)
        else:
            getattr(A, name)(*ts, [2.0, 5.0], **ADAM, amsgrad=True, maximize=False)
        assert [version_of(t) for t in ts[0]] > versions          # every written tensor is bumped
        results.append([t.numpy() for t_ in ts for t in t_])
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_adam_of_a_complex_parameter_updates_its_real_view():
    z = (RNG.standard_normal(3) + 1j * RNG.standard_normal(3)).astype(np.complex64)
    g = (RNG.standard_normal(3) + 1j * RNG.standard_normal(3)).astype(np.complex64)
    p, m, v = dj.tensor(z), dj.zeros(3, dtype=dj.complex64), dj.zeros(3, dtype=dj.complex64)
    A._fused_adam_([p], [dj.tensor(g)], [m], [v], [], [1.0], **ADAM, amsgrad=False, maximize=False)
    parts = []
    for k in (np.real, np.imag):      # each part an independent float32 parameter
        q = dj.tensor(k(z).copy())
        A._fused_adam_([q], [dj.tensor(k(g).copy())], [dj.zeros(3)], [dj.zeros(3)], [], [1.0], **ADAM,
                       amsgrad=False, maximize=False)
        parts.append(q.numpy())
    np.testing.assert_array_equal(p.numpy(), parts[0] + 1j * parts[1])


def test_bias_corrections_are_the_optimizers():
    # one step of the op from state zero equals lr * sign(g) scaled as Adam's first step
    p, g = dj.zeros(2, dtype=dj.float64), dj.tensor([1.0, -2.0], dtype=dj.float64)
    A._fused_adam_([p], [g], [dj.zeros(2, dtype=dj.float64)], [dj.zeros(2, dtype=dj.float64)], [], [1.0],
                   lr=0.1, beta1=0.9, beta2=0.999, weight_decay=0.0, eps=0.0, amsgrad=False, maximize=False)
    m, v = 0.1 * g.numpy(), 0.001 * g.numpy() ** 2
    want = -(0.1 / (1 - 0.9)) * m / (np.sqrt(v) / math.sqrt(1 - 0.999))
    np.testing.assert_allclose(p.numpy(), want, rtol=1e-12)


@pytest.mark.parametrize("call, match", [
    (lambda ts: A._fused_adam_(ts[0], ts[1][:1], ts[2], ts[3], [], [1.0, 1.0], **ADAM, amsgrad=False,
                               maximize=False), "grads has 1 tensors but self has 2"),
    (lambda ts: A._fused_adam_(ts[0], ts[1], ts[2], ts[3], [], [1.0, 1.0], **ADAM, amsgrad=True,
                               maximize=False), "amsgrad=True updates max_exp_avg_sqs"),
    (lambda ts: A._fused_sgd_(ts[0], ts[1], [], **SGD, maximize=False, is_first_step=False),
     "momentum != 0 updates a momentum buffer"),
    (lambda ts: A._fused_sgd_(ts[0], ts[1], ts[2], **SGD, maximize=False, is_first_step=False,
                              grad_scale=dj.ones(())), "grad_scale and found_inf"),
])
def test_errors_name_the_argument(call, match):
    ts = _dj(_arrays(2))
    with pytest.raises(InvalidArgumentError, match=match):
        call(ts)


def test_compiled_mode_records_the_op_and_equals_eager():
    lists = _arrays(1, np.float32)
    want = _dj(lists)
    A._fused_sgd_(*want, **SGD, maximize=False, is_first_step=False)
    got = _dj(lists)
    before = lazy_info()
    with dj.execution_mode("compiled"):
        grads = [g * 1.0 for g in got[1]]         # pending: the loop reads them inside the graph
        A._fused_sgd_(got[0], grads, got[2], **SGD, maximize=False, is_first_step=False)
    after = lazy_info()
    assert after["steps_recorded"] == before["steps_recorded"] + 1
    assert after["flushes"] == before["flushes"] + 1          # the update is the sync point
    for ts, us in zip(want, got):
        for t, u in zip(ts, us):
            np.testing.assert_array_equal(t.numpy(), u.numpy())
