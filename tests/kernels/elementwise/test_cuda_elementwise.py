"""CUDA elementwise kernels (kernels/elementwise/cuda.py) against the CPU kernels.

Every op of kernels/elementwise/table.py runs on CUDA tensors and on the same data on the
CPU; values and result dtypes must agree.  Under Numba's CUDA simulator a
launch costs milliseconds and every (op, dtype) pair costs a CPU compile for
the oracle, so arrays are tiny (8 elements) and each op checks a few
representative dtypes.  Integer division by zero is not tested: the CPU
raises, a CUDA kernel cannot (see the module docstring for what it gives).
"""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.dtypes import BOOL, COMPLEX, FLOAT, INT
from dispatch_jit.errors import BroadcastError, CastingError, DeviceMismatchError, DTypeError, ShapeError
from dispatch_jit.kernels.elementwise.table import SCALAR_OPS

pytestmark = [pytest.mark.skipif(not dj.cuda.is_available(), reason="no CUDA device or simulator"),
              pytest.mark.filterwarnings("ignore::RuntimeWarning")]   # the simulator computes with NumPy scalars

TOL = {dj.float16: 2e-3, dj.float32: 2e-6, dj.float64: 1e-12, dj.complex64: 2e-6, dj.complex128: 1e-12}

# operand values per dtype kind: x, y (divisors nonzero, integer exponents nonnegative), z
_VALS = {
    "bool": ([1, 0, 1, 1, 0, 0, 1, 0], [1, 1, 0, 1, 0, 1, 0, 0], [0, 1, 1, 0, 1, 0, 0, 1]),
    "int": ([-3, -2, -1, 0, 1, 2, 5, 7], [2, 3, 1, 4, 1, 2, 3, 2], [-1, 0, -2, 3, 0, 2, 2, 4]),
    "float": ([-1.5, -0.5, 0.0, 0.25, 0.5, 0.75, 1.0, 2.5], [1.5, -2.0, 0.25, 3.0, -0.5, 2.0, 1.0, 0.5],
              [-1.0, 0.1, 0.3, 0.2, 0.6, 0.5, 2.0, 1.0]),
    "complex": ([1 + 2j, -0.5 + 1j, 0.25 - 1.5j, 2 + 0j, -1 - 1j, 0.5j, 1.5 + 0.5j, 0.3 + 0.1j],
                [0.5 - 1j, 2 + 0.5j, -1 + 0.25j, 1j, 1.5 + 1j, -2 - 0.5j, 0.75 + 0j, 1 + 1j],
                [1 + 0j, 0.5 + 0.5j, -1j, 2 - 1j, -0.5 + 0j, 1 + 1j, 0.25 - 0.25j, 1j]),
}
_KIND = {BOOL: "bool", INT: "int", FLOAT: "float", COMPLEX: "complex"}


# dtypes beyond each op's first one; every (op, dtype) costs a CPU compile for the oracle
_EXTRA = {
    dj.int64: {"add", "sub", "mul", "floor_divide", "remainder", "pow", "maximum", "clamp", "sign", "abs",
               "floor", "eq", "exp"},
    dj.bool: {"add", "mul", "logical_and", "logical_not", "where", "maximum", "bitwise_not",
              "bitwise_xor", "eq"},
    dj.float16: {"add", "exp", "sigmoid", "div", "floor"},
    dj.complex64: {"mul", "div", "exp", "sqrt", "abs", "log", "eq", "pow", "tanh", "isfinite"},
    dj.float64: {"atan2", "round", "remainder", "floor_divide"},
}


def _dtypes(op):
    """float32 where the op computes in floating point (int64, then bool otherwise), plus the
    dtypes of ``_EXTRA`` that name the op."""
    cats = op.cats
    first = dj.float32 if (FLOAT in cats or op.rule == "float") else dj.int64 if INT in cats else dj.bool
    return [first] + [d for d, names in _EXTRA.items() if op.name in names and d is not first]


def _operands(op, dt, shape=(2, 4)):
    vals = _VALS[_KIND[dt.category]]
    if op.name == "where":
        cond = dj.tensor(np.array(_VALS["bool"][0], bool).reshape(shape))
        return [cond] + [dj.tensor(np.array(v).reshape(shape), dtype=dt) for v in vals[1:3]]
    if op.name == "clamp":
        lo = np.minimum(vals[1], vals[2]) if dt.category else vals[1]
        hi = np.maximum(vals[1], vals[2]) if dt.category else vals[2]
        return [dj.tensor(np.array(v).reshape(shape), dtype=dt) for v in (vals[0], lo, hi)]
    return [dj.tensor(np.array(v).reshape(shape), dtype=dt) for v in vals[:op.arity]]


# the statics of the rows that have required ones (the others run with their defaults)
_STATICS = {"threshold": {"threshold": 1, "value": -1}, "polygamma": {"n": 1},
            "nan_to_num": {"nan": 0.0, "posinf": 1.0, "neginf": -1.0}}


def _fn(op):
    entry = getattr(dj, op.name) if op.function else getattr(dj.ops.aten, op.name)
    return lambda *args: entry(*args, **_STATICS.get(op.name, {}))


def assert_same(cuda_t, cpu_t):
    assert cuda_t.is_cuda, cuda_t.device
    assert cuda_t.dtype == cpu_t.dtype, (cuda_t.dtype, cpu_t.dtype)
    got, want = cuda_t.numpy(), cpu_t.numpy()
    assert got.shape == want.shape
    tol = TOL.get(cpu_t.dtype)
    if tol is None:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)


# -- the oracle: every op, a few dtypes each -----------------------------------------------------
@pytest.mark.parametrize("name", sorted(SCALAR_OPS))
def test_op_matches_cpu(name):
    op = SCALAR_OPS[name]
    for dt in _dtypes(op):
        args = _operands(op, dt)
        want = _fn(op)(*args)
        got = _fn(op)(*[a.cuda() for a in args])
        assert_same(got, want)


def test_every_op_has_cuda_kernels():
    from dispatch_jit.keys import DispatchKey
    from dispatch_jit.kernels.elementwise.table import ELEMENTWISE_SCHEMAS
    from dispatch_jit.registry import lookup
    for name, (f, i) in ELEMENTWISE_SCHEMAS.items():
        for s in (f, i):
            if s:
                kern, _ = lookup("aten::" + s.split("(")[0]).table[DispatchKey.CUDA.value]
                assert kern is not None and kern.__name__.endswith("_cuda"), s


# -- broadcasting and layouts ----------------------------------------------------------------------
def test_broadcasting_matches_cpu():
    a = dj.tensor(np.arange(6, dtype=np.float32).reshape(2, 1, 3))
    b = dj.tensor(np.array([[1.0], [2.0], [-1.0], [0.5]], np.float32))
    assert_same(dj.sub(a.cuda(), b.cuda(), alpha=2), dj.sub(a, b, alpha=2))        # (2,1,3) x (4,1)
    c = dj.tensor(np.array([3, -1, 2], np.int64))
    assert_same(dj.mul(a.cuda(), c.cuda()), dj.mul(a, c))                           # ndim and dtype differ
    with pytest.raises(BroadcastError) as cpu_err:
        dj.add(a, dj.zeros(4))
    with pytest.raises(BroadcastError) as cuda_err:
        dj.add(a.cuda(), dj.zeros(4, device="cuda"))
    assert str(cuda_err.value) == str(cpu_err.value)


def test_non_contiguous_inputs():
    a = dj.tensor(np.arange(12, dtype=np.float32).reshape(3, 4) - 5)
    b = dj.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))
    ac, bc = a.cuda(), b.cuda()
    assert_same(dj.add(ac.T, bc), dj.add(a.T, b))                  # transposed + contiguous
    assert_same(dj.maximum(ac[:, ::2], ac[:, 1::2]), dj.maximum(a[:, ::2], a[:, 1::2]))   # sliced
    assert_same(dj.neg(ac.T), dj.neg(a.T))                           # unary, strided
    assert_same(dj.where(ac.T > 0, ac.T, bc), dj.where(a.T > 0, a.T, b))


def test_python_scalars_and_statics():
    x = dj.tensor(np.array([[1, -2, 3], [4, 5, -6]], np.int64))
    xc = x.cuda()
    assert_same(dj.add(xc, 2), dj.add(x, 2))                          # stays int64
    assert_same(dj.add(xc, 2.5), dj.add(x, 2.5))                      # float scalar: default float dtype
    assert_same(dj.mul(xc, True), dj.mul(x, True))
    assert_same(dj.sub(xc, xc, alpha=3), dj.sub(x, x, alpha=3))
    assert_same(xc > 1, x > 1)
    f = dj.tensor(np.array([0.5, -1.0, 2.0], np.float32))
    assert_same(dj.add(f.cuda(), f.cuda(), alpha=0.5), dj.add(f, f, alpha=0.5))
    assert_same(dj.clamp(f.cuda(), -0.5, None), dj.clamp(f, -0.5, None))
    assert_same(dj.where(f.cuda() > 0, f.cuda(), 0.0), dj.where(f > 0, f, 0.0))
    with pytest.raises(DTypeError) as cpu_err:
        dj.add(x, x, alpha=0.5)
    with pytest.raises(DTypeError) as cuda_err:
        dj.add(xc, xc, alpha=0.5)
    assert str(cuda_err.value) == str(cpu_err.value)


def test_zero_dim_cpu_tensor_operand():
    x = dj.tensor(np.array([1.5, -2.0, 3.0], np.float32))
    i = dj.tensor(np.array([1, -2, 3], np.int64))
    for a, s in ((x, dj.tensor(2.0, dtype=dj.float64)),        # a zero-dim float64 does not widen float32
                 (i, dj.tensor(2.5, dtype=dj.float64)),        # ... but lifts an int tensor's category
                 (i, dj.tensor(3, dtype=dj.int8))):
        assert_same(dj.mul(a.cuda(), s), dj.mul(a, s))
        assert_same(dj.sub(s, a.cuda()), dj.sub(s, a))
    assert_same(dj.where(x.cuda() > 0, x.cuda(), dj.tensor(0.0)), dj.where(x > 0, x, dj.tensor(0.0)))
    z = dj.zeros((), device="cuda")                                  # zero-dim CUDA + zero-dim CPU
    r = dj.add(z, dj.tensor(1.0, dtype=dj.float64))
    assert_same(r, dj.add(dj.zeros(()), dj.tensor(1.0, dtype=dj.float64)))


def test_device_mismatch():
    with pytest.raises(DeviceMismatchError, match="Expected all tensors to be on the same device, but found "
                                                  "cuda:0 and cpu"):
        dj.add(dj.zeros(3, device="cuda"), dj.zeros(3))


# -- out= and in-place -----------------------------------------------------------------------------
def test_out():
    x = dj.tensor(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
    y = dj.tensor(np.array([0.5, -1.0], np.float32))
    xc, yc = x.cuda(), y.cuda()
    out = dj.zeros(2, 2, dtype=dj.float64, device="cuda")       # float32 result stored as float64
    r = dj.mul(xc, yc, out=out)
    assert r is out and out.dtype == dj.float64
    np.testing.assert_allclose(out.numpy(), x.numpy() * y.numpy())
    outt = dj.zeros(2, 2, device="cuda").T                           # non-contiguous out
    dj.add(xc, yc, out=outt)
    np.testing.assert_allclose(outt.numpy(), x.numpy() + y.numpy())
    h = dj.zeros(2, 2, dtype=dj.float16, device="cuda")
    dj.exp(xc, out=h)
    np.testing.assert_allclose(h.numpy(), np.exp(x.numpy()).astype(np.float16), rtol=1e-3)
    cases = [(CastingError, lambda o: dj.add(o(x), o(y), out=o(dj.zeros(2, 2, dtype=dj.int64)))),
             (ShapeError, lambda o: dj.add(o(x), o(y), out=o(dj.zeros(3)))),
             (ShapeError, lambda o: dj.add(o(x), o(y), out=o(dj.zeros(2)).expand((2, 2))))]   # read-only
    for err, fn in cases:
        with pytest.raises(err) as cpu_err:
            fn(lambda t: t)
        with pytest.raises(err) as cuda_err:
            fn(lambda t: t.cuda())
        assert str(cuda_err.value) == str(cpu_err.value)


def test_inplace():
    x = dj.tensor(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32))
    y = dj.tensor(np.array([0.5, -1.0, 2.0], np.float32))
    xc = x.cuda()
    storage = xc._data.storage
    r = xc.mul_(y.cuda())                                             # broadcast other
    assert r is xc and xc._data.storage is storage
    np.testing.assert_allclose(xc.numpy(), x.numpy() * y.numpy())
    xc.T.add_(1.0)                                                    # strided target
    np.testing.assert_allclose(xc.numpy(), x.numpy() * y.numpy() + 1)
    i = dj.tensor(np.array([1, 2, 3], np.int64))
    with pytest.raises(CastingError) as cpu_err:
        i.clone().add_(y)
    with pytest.raises(CastingError) as cuda_err:
        i.cuda().add_(y.cuda())
    assert str(cuda_err.value) == str(cpu_err.value)
    with pytest.raises(ShapeError):                                   # in-place can't broadcast self
        y.cuda().add_(x.cuda())


def test_inplace_overlap_copies_input_first():
    a = dj.tensor(np.arange(8, dtype=np.float32))
    ac = a.cuda()
    ac[1:].add_(ac[:-1])                          # reads elements the kernel writes: the input is copied first
    ca = a.clone()
    ca[1:].add_(ca[:-1])
    np.testing.assert_array_equal(ac.numpy(), ca.numpy())
    m = dj.tensor(np.arange(9, dtype=np.float32).reshape(3, 3))
    mc = m.cuda()
    mc.add_(mc.T)                                 # same storage, other layout
    np.testing.assert_array_equal(mc.numpy(), m.numpy() + m.numpy().T)


def test_dtype_errors_match_cpu():
    f = dj.tensor(np.array([1.0, 2.0], np.float32))
    c = dj.tensor(np.array([1 + 1j, 2j], np.complex64))
    b = dj.tensor(np.array([True, False]))
    for fn, args in ((dj.bitwise_and, (f, f)), (dj.lt, (c, c)), (dj.neg, (b,)), (dj.floor, (c,)),
                     (dj.atan2, (c, c))):
        with pytest.raises(DTypeError) as cpu_err:
            fn(*args)
        with pytest.raises(DTypeError) as cuda_err:
            fn(*[a.cuda() for a in args])
        assert str(cuda_err.value) == str(cpu_err.value)


def test_float16_computes_in_float32():
    x = dj.tensor(np.array([0.1, 1.0, -2.5, 60000.0], np.float16))
    assert_same(dj.mul(x.cuda(), x.cuda()), dj.mul(x, x))         # 60000**2 overflows to inf in float16
    assert_same(dj.div(x.cuda(), 3), dj.div(x, 3))


# -- autograd: elementwise-only chains on CUDA ------------------------------------------------------
def test_gradient_flows_on_cuda():
    x = dj.rand(4, device="cuda", requires_grad=True)
    y = x * x + x
    assert y.is_cuda and y.requires_grad
    y.backward(dj.ones_like(y))
    assert x.grad.is_cuda
    xv = x.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), 2 * xv + 1, rtol=1e-6)


# -- integer MIN // -1 and MIN % -1 (issue 12) ----------------------------------------------------
class _Wrapping(int):
    """An integer of ``bits`` bits as the hardware computes it: add, sub and neg wrap; a division
    that overflows (MIN // -1, MIN % -1) is unspecified on PTX (x86 traps), so it raises here."""

    bits = 32

    @classmethod
    def of(cls, v, bits):
        t = type(f"_W{bits}", (cls,), {"bits": bits})
        return t(v)

    def _wrap(self, v):
        m = 1 << self.bits
        return type(self)((int(v) + m // 2) % m - m // 2)

    def __add__(self, o):
        return self._wrap(int(self) + int(o))

    def __sub__(self, o):
        return self._wrap(int(self) - int(o))

    def __neg__(self):
        return self._wrap(-int(self))

    def _overflows(self, o):
        return int(o) == -1 and int(self) == -(1 << (self.bits - 1))

    def __floordiv__(self, o):
        if self._overflows(o):
            raise OverflowError(f"{int(self)} // {int(o)} overflows int{self.bits}")
        return self._wrap(int(self) // int(o))

    def __mod__(self, o):
        if self._overflows(o):
            raise OverflowError(f"{int(self)} % {int(o)} overflows int{self.bits}")
        return self._wrap(int(self) % int(o))


@pytest.mark.parametrize("bits", [8, 16, 32, 64])
def test_cuda_integer_helpers_never_divide_min_by_minus_one(bits):
    from dispatch_jit.kernels.support.loops.cuda import _ifloordiv_cuda, _iremainder_cuda
    mn = -(1 << (bits - 1))
    a, m1 = _Wrapping.of(mn, bits), _Wrapping.of(-1, bits)
    assert _ifloordiv_cuda(a, m1) == mn            # wraps to MIN, as NumPy and torch
    assert _iremainder_cuda(a, m1) == 0
    for x, y, q, r in ((7, -1, -7, 0), (-7, 2, -4, 1), (7, 0, 0, 0), (mn, 1, mn, 0)):
        x, y = _Wrapping.of(x, bits), _Wrapping.of(y, bits)
        assert (_ifloordiv_cuda(x, y), _iremainder_cuda(x, y)) == (q, r)


@pytest.mark.parametrize("dt", [np.int8, np.int32, np.int64])
def test_cuda_min_floordiv_minus_one_wraps_as_cpu_and_torch(dt):
    mn = np.iinfo(dt).min
    a, b = np.array([mn, mn, 7, -7, 5], dt), np.array([-1, 1, -1, 2, -1], dt)
    want_q, want_r = np.array([mn, mn, -7, -4, -5], dt), np.array([0, 0, 0, 1, 0], dt)   # by hand
    x, y = dj.from_numpy(a), dj.from_numpy(b)
    xc, yc = x.to("cuda"), y.to("cuda")
    np.testing.assert_array_equal(dj.floor_divide(x, y).numpy(), want_q)                # the CPU helper
    np.testing.assert_array_equal(dj.remainder(x, y).numpy(), want_r)
    np.testing.assert_array_equal(dj.floor_divide(xc, yc).cpu().numpy(), want_q)
    np.testing.assert_array_equal(dj.remainder(xc, yc).cpu().numpy(), want_r)
    fused = dj.compile(lambda p, q: (p // q, (p + 0) % q))
    got_q, got_r = fused(xc, yc)
    np.testing.assert_array_equal(got_q.cpu().numpy(), want_q)
    np.testing.assert_array_equal(got_r.cpu().numpy(), want_r)
    torch = pytest.importorskip("torch")
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    np.testing.assert_array_equal(torch.floor_divide(ta, tb).numpy(), want_q)
    np.testing.assert_array_equal(torch.remainder(ta, tb).numpy(), want_r)


def test_hardware_products_are_never_contracted():
    # NVVM would fuse a product feeding an add into one FMA; a fused region (one kernel) would then
    # round once where eager (two kernels) rounds twice.  On hardware every float product is
    # libdevice's mul.rn in the compute dtype; nextafter goes to libdevice too (NumPy's has no CUDA lowering)
    from dispatch_jit.kernels.support.loops.cuda import cuda_expression
    add, mul, nxt = SCALAR_OPS["add"], SCALAR_OPS["mul"], SCALAR_OPS["nextafter"]
    assert cuda_expression(add, dj.float32, ("x", "y"), False) == "x + _ld.fmul_rn(alpha, y)"
    assert cuda_expression(mul, dj.float64, ("x", "y"), False) == "_ld.dmul_rn(x, y)"
    assert cuda_expression(mul, dj.int64, ("x", "y"), False) == "x * y"
    assert cuda_expression(mul, dj.float32, ("x", "y"), True) == "x * y"      # the simulator runs NumPy
    assert cuda_expression(nxt, dj.float32, ("x", "y"), False) == "_ld.nextafterf(x, y)"


@pytest.mark.gpu
def test_fused_chain_rounds_as_eager_on_hardware():
    a, b, c = (dj.rand(4096, device="cuda", dtype=dt) for dt in (dj.float32,) * 3)
    f = lambda a, b, c: (a * b + c) * 3.0 - a * c
    np.testing.assert_array_equal(dj.compile(f)(a, b, c).numpy(), f(a, b, c).numpy())
