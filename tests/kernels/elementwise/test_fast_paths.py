"""The elementwise kernels' generated fast paths give what the general path gives, in every state.

A fast path (kernels/elementwise/cpu.py: ``_Plan.fast``, ``_Plan.fast_inplace``) is taken on a
memo hit when its runtime checks pass, and hands everything else to the general path; these tests
check that the fast path is the one memoized, and that its results, errors, version counters and
overlap handling equal the general path's.
"""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.dispatcher import memo_key
from dispatch_jit.errors import CastingError, DTypeError, ShapeError
from dispatch_jit.kernels.elementwise import cpu as cpu_elementwise
from dispatch_jit.registry import lookup
from dispatch_jit.tensor import version_of


def _memoized(opname: str, *args):
    """The kernel the memo holds for ``opname`` on ``args`` (every schema argument, positionally),
    unwrapped, and its generated source's name."""
    op = lookup(opname)
    fn = op.memo[memo_key(op, args)]
    while hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    code = getattr(fn, "__code__", None)
    return fn, code.co_filename if code is not None else repr(fn)


def _f32(n, start=0.0, step=0.37):
    return dj.tensor(np.arange(n, dtype=np.float32) * np.float32(step) + np.float32(start))


def test_inplace_fast_path_is_memoized_and_equals_the_general_path():
    a, b = _f32(16, -2.0), _f32(16, 1.0, 0.11)
    x = a.clone()
    assert x.add_(b, alpha=0.5) is x
    fast, name = _memoized("aten::add_.Tensor", x, b, 0.5)
    assert "in-place fast path" in name
    y = a.clone()
    assert fast.__globals__["_general"](y, b, 0.5) is y       # the general path, on the same operands
    np.testing.assert_array_equal(x.numpy().view(np.uint32), y.numpy().view(np.uint32))
    # a Python scalar operand, and an operand that is the written tensor itself
    x.mul_(3.0)
    y.mul_(dj.tensor([3.0] * 16))
    np.testing.assert_array_equal(x.numpy(), y.numpy())
    x.add_(x)
    np.testing.assert_array_equal(x.numpy(), y.numpy() * 2)


def test_inplace_fast_path_bumps_the_version_once_per_write():
    x, b = _f32(8), _f32(8, 1.0)
    v0 = version_of(x)
    x.add_(b)
    x.mul_(2.0)
    x.sub_(b)
    assert version_of(x) == v0 + 3
    assert "in-place fast path" in _memoized("aten::sub_.Tensor", x, b, 1)[1]
    # autograd sees the write: a tensor saved for backward, then changed in place, is refused
    w = dj.ones(8, requires_grad=True)
    h = w * 2.0
    s = (h * h).sum()
    with dj.no_grad():
        h.add_(b)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        s.backward()


@pytest.mark.parametrize("case", ["disjoint views", "partial overlap ahead", "partial overlap behind",
                                  "view of another tensor"])
def test_inplace_fast_path_overlapping_operands(case):
    base = _f32(24, 1.0)
    want = base.numpy().astype(np.float32)
    if case == "disjoint views":
        base[0:8].add_(base[8:16])
        want[0:8] = want[0:8] + want[8:16]
    elif case == "partial overlap ahead":          # a forward loop would read what it just wrote
        base[1:9].add_(base[0:8])
        want[1:9] = want[1:9] + want[0:8].copy()
    elif case == "partial overlap behind":
        base[0:8].add_(base[1:9])
        want[0:8] = want[0:8] + want[1:9].copy()
    else:
        other = _f32(24, -3.0)
        head = base[0:8]
        head.add_(other[4:12])
        want[0:8] = want[0:8] + other.numpy()[4:12]
    np.testing.assert_array_equal(base.numpy(), want)
    # the same-shape contiguous views all resolve to the in-place fast path, which checks overlap per call
    assert "in-place fast path" in _memoized("aten::add_.Tensor", base[0:8], base[8:16], 1)[1]


def test_inplace_fast_path_refuses_what_the_general_path_refuses():
    n = np.ones(4, np.float32)
    n.flags.writeable = False
    ro = dj.from_numpy(n)
    with pytest.raises(ShapeError, match="read-only"):
        ro.add_(dj.ones(4))
    np.testing.assert_array_equal(n, np.ones(4, np.float32))
    with pytest.raises(ShapeError, match=r"\(4,\).*\(2, 4\)"):
        dj.ones(4).add_(dj.ones(2, 4).reshape(2, 4)[0:1].reshape(1, 4).expand(2, 4).contiguous())
    i = dj.tensor([1, 2, 3])
    with pytest.raises(DTypeError, match="alpha"):
        i.add_(dj.tensor([1, 1, 1]), alpha=0.5)
    with pytest.raises(CastingError):
        i.mul_(dj.ones(3))
    np.testing.assert_array_equal(i.numpy(), [1, 2, 3])
    i.add_(dj.tensor([1, 1, 1]), alpha=2)
    np.testing.assert_array_equal(i.numpy(), [3, 4, 5])


def _with(state):
    if state == "no_grad":
        return dj.no_grad()
    if state == "inference_mode":
        return dj.inference_mode()
    if state == "autocast":
        return dj.autocast("cpu", dtype=dj.bfloat16)
    return _Recorder()


class _Recorder(dj.DispatchMode):
    def __init__(self):
        self.seen = []

    def __dispatch__(self, op, types, args, kwargs):
        self.seen.append(op.name())
        return op(*args, **kwargs)


@pytest.mark.parametrize("state", ["no_grad", "inference_mode", "autocast", "mode"])
def test_inplace_fast_path_in_every_state(state):
    a, b = _f32(16, -1.0), _f32(16, 2.0, 0.05)
    x = a.clone()
    x.add_(b, alpha=2)                 # outside: memoized
    ctx = _with(state)
    y = a.clone()
    with ctx:
        y.add_(b, alpha=2)
    np.testing.assert_array_equal(x.numpy(), y.numpy())
    if state == "mode":
        assert "aten::add_.Tensor" in ctx.seen


def test_user_kernel_registered_later_replaces_the_fast_path():
    # an operand requiring grad puts AutogradCPU in the call's keys: autograd's kernel, then the
    # CPU fast path below it, both memoized before the user's kernel comes
    x, b = _f32(4), _f32(4, 1.0).requires_grad_()
    x.add_(b)
    calls = []

    def my_add_(self, other, alpha=1):
        calls.append(alpha)
        self.detach()._data[...] = 7.0
        return self

    lib = dj.Library("aten", "IMPL")
    try:
        # a direct kernel at AutogradCPU outranks the Autograd alias
        lib.impl("add_.Tensor", my_add_, "AutogradCPU")
        x.add_(b)
        np.testing.assert_array_equal(x.detach().numpy(), np.full(4, 7.0, np.float32))
        assert calls == [1]
    finally:
        lib._destroy()
    x.add_(b)
    np.testing.assert_array_equal(x.detach().numpy(), 7.0 + b.detach().numpy())


def test_inplace_fast_path_above_the_parallel_threshold():
    n = cpu_elementwise.PARALLEL_MIN
    a = np.linspace(-3, 3, n, dtype=np.float32)
    x, y = dj.asarray(a.copy()), dj.asarray(a[::-1].copy())
    x.mul_(y)
    assert "in-place fast path" in _memoized("aten::mul_.Tensor", x, y)[1]
    np.testing.assert_array_equal(x.numpy(), a * a[::-1])


def test_functional_fast_path_one_dim_checks_shapes_per_call():
    a, b = _f32(6, 1.0), _f32(6, -2.0)
    np.testing.assert_array_equal((a + b).numpy(), a.numpy() + b.numpy())
    assert "fast path" in _memoized("aten::add.Tensor", a, b, 1, None)[1]
    # the same signature with a broadcast operand or another length: the general path, per call
    one = _f32(1, 5.0)
    np.testing.assert_array_equal((a + one).numpy(), a.numpy() + np.float32(5.0))
    with pytest.raises(dj.errors.BroadcastError, match=r"\(6,\).*\(4,\)"):
        a + _f32(4)
    z = dj.tensor(2.0) * dj.tensor(3.0)
    assert z.shape == () and z.item() == 6.0


class _MyFloat(float):
    pass


@pytest.mark.parametrize("v", [2, 2.0, True, np.float64(2.0), np.int64(2), _MyFloat(2.0)],
                         ids=["int", "float", "bool", "np.float64", "np.int64", "float subclass"])
def test_number_operands_hit_what_a_miss_resolves(v):
    # the entry keys a Python number by a dict lookup, a NumPy scalar or a subclass by scalar_sig
    x = dj.tensor([1, 2, 3], dtype=dj.int32)
    op = lookup("aten::mul.Tensor")
    op.memo.clear()
    want = x * v                        # a miss
    got = x * v                         # a hit
    assert op.misses and got.dtype == want.dtype
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    if type(v) in (int, float, bool):   # PyTorch's promotion: a Python number is weak
        assert got.dtype == (dj.float32 if type(v) is float else dj.int32)


# -- the broadcast path: contiguous operands of different shapes ------------------------------
def _general_of(opname: str, *args):
    """The general path of the plan memoized for ``opname`` on ``args``."""
    fn, _ = _memoized(opname, *args)
    plan = fn.__self__ if hasattr(fn, "__self__") else fn.__globals__["_general"].__self__
    return plan.general


_BCAST = [((2, 3, 4), (4,)), ((4,), (2, 3, 4)), ((2, 3, 4), (2, 3, 1)), ((3, 1), (1, 4)), ((2, 3, 4), ()),
          ((2, 1, 4), (3, 1)), ((1,), (5,))]


@pytest.mark.parametrize("sa,sb", _BCAST, ids=[f"{a}-{b}" for a, b in _BCAST])
def test_broadcast_path_equals_the_general_path(sa, sb):
    rng = np.random.default_rng(len(sa) * 10 + len(sb))
    a = dj.tensor(rng.standard_normal(sa).astype(np.float32))
    b = dj.tensor(rng.standard_normal(sb).astype(np.float32))
    for opname, call, args in [("aten::add.Tensor", lambda: dj.add(a, b, alpha=0.5), (a, b, 0.5, None)),
                               ("aten::mul.Tensor", lambda: a * b, (a, b, None))]:
        got = call()
        fn, name = _memoized(opname, *args)
        assert getattr(fn, "__name__", "") == "broadcast" or "fast path" in name
        want = _general_of(opname, *args)(*args)
        assert got.shape == want.shape == np.broadcast_shapes(sa, sb)
        assert got.dtype == want.dtype and got._sig == want._sig
        np.testing.assert_array_equal(got.numpy().view(np.uint32), want.numpy().view(np.uint32))


def test_broadcast_path_mixed_kinds_and_dtypes():
    i = dj.tensor(np.arange(12, dtype=np.int32).reshape(3, 4))
    row = dj.tensor(np.array([1, -2, 3, -4], dtype=np.int64))
    np.testing.assert_array_equal((i * row).numpy(), i.numpy() * row.numpy())
    assert (i * row).dtype == dj.int64
    with pytest.raises(DTypeError, match="alpha"):
        dj.add(i, row, alpha=0.5)
    cond = dj.tensor([[True, False, True, False]])
    x = dj.tensor(np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 3, 4))
    got = dj.where(cond, 1.5, x)
    np.testing.assert_array_equal(got.numpy(), np.where(cond.numpy(), np.float32(1.5), x.numpy()))
    # out=, an empty operand, shapes that do not broadcast: the general path and its errors
    out = dj.empty(2, 3, 4)
    assert dj.add(x, row.float(), out=out) is out
    np.testing.assert_array_equal(out.numpy(), x.numpy() + row.numpy().astype(np.float32))
    assert (dj.ones(2, 0, 4) + dj.ones(4)).shape == (2, 0, 4)
    with pytest.raises(dj.errors.BroadcastError, match=r"\(2, 3, 4\) and \(5,\)"):
        x + dj.ones(5)
    ro = np.ones(4, np.float32)
    ro.flags.writeable = False
    np.testing.assert_array_equal((x + dj.from_numpy(ro)).numpy(), x.numpy() + 1)


def test_broadcast_path_many_shapes_and_the_parallel_loop():
    b = dj.tensor(np.array([0.5, -1.0, 2.0, 3.0], np.float32))
    for k in range(1, 80):              # more shapes than the per-plan bound keeps
        a = dj.tensor(np.arange(4 * k, dtype=np.float32).reshape(k, 4))
        np.testing.assert_array_equal((a + b).numpy(), a.numpy() + b.numpy())
    n = cpu_elementwise.PARALLEL_MIN // 64
    a = dj.tensor(np.linspace(-2, 2, n * 64, dtype=np.float32).reshape(n, 64))
    w = dj.tensor(np.linspace(0, 1, 64, dtype=np.float32))
    got = a * w
    want = _general_of("aten::mul.Tensor", a, w, None)(a, w, None)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("state", ["no_grad", "inference_mode", "autocast", "mode"])
def test_broadcast_path_in_every_state(state):
    x = dj.tensor(np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 3, 4))
    b = dj.tensor(np.array([0.25, 0.5, 1.0, 2.0], np.float32))
    want = x * b
    ctx = _with(state)
    with ctx:
        got = x * b
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    if state == "mode":
        assert "aten::mul.Tensor" in ctx.seen
    # and with autograd: the gradient of the repeated operand is summed back
    w = dj.tensor(np.ones(4, np.float32), requires_grad=True)
    (x * w).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), x.numpy().sum(axis=(0, 1)), rtol=1e-6)


def test_inplace_broadcast_path():
    rng = np.random.default_rng(7)
    g = dj.tensor(rng.standard_normal((5, 4)).astype(np.float32))
    coef = dj.tensor(np.float32(0.3))
    want = g.numpy() * np.float32(0.3)
    v0 = version_of(g)
    assert g.mul_(coef) is g                          # clip_grad_norm_'s g.mul_(clip_coef)
    fn, _ = _memoized("aten::mul_.Tensor", g, coef)
    assert fn.__name__ == "broadcast_inplace" and version_of(g) == v0 + 1
    np.testing.assert_array_equal(g.numpy(), want)
    h0 = rng.standard_normal((5, 4)).astype(np.float32)
    h, k = dj.tensor(h0), dj.tensor(h0)
    h.mul_(coef)
    fn.__self__.general(k, coef)                      # the general path, on the same operands
    np.testing.assert_array_equal(h.numpy().view(np.uint32), k.numpy().view(np.uint32))
    row = dj.tensor(np.array([1.0, 2.0, 3.0, 4.0], np.float32))
    x = dj.tensor(np.arange(20, dtype=np.float32).reshape(5, 4))
    x.add_(row, alpha=2)
    np.testing.assert_array_equal(x.numpy(), np.arange(20, dtype=np.float32).reshape(5, 4) + 2 * row.numpy())
    # an operand that is a row of the written tensor: read before it is written, as the general path does
    y = dj.tensor(np.arange(20, dtype=np.float32).reshape(5, 4))
    y.sub_(y[2])
    n = np.arange(20, dtype=np.float32).reshape(5, 4)
    np.testing.assert_array_equal(y.numpy(), n - n[2].copy())
    with pytest.raises(ShapeError, match=r"\(4,\).*\(5, 4\)"):
        row.add_(x)
    ro = np.ones((2, 4), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ShapeError, match="read-only"):
        dj.from_numpy(ro).mul_(coef)
    i = dj.tensor(np.arange(6, dtype=np.int64).reshape(2, 3))
    with pytest.raises(CastingError):
        i.mul_(coef)
    with pytest.raises(DTypeError, match="alpha"):
        i.add_(dj.tensor([1, 1, 1]), alpha=0.5)
    np.testing.assert_array_equal(i.numpy(), np.arange(6).reshape(2, 3))
