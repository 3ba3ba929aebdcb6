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
