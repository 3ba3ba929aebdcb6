"""Oracle tests for kernels/reduction/cpu.py (and its table and codegen): op x dtype x axis x layout against NumPy.

NumPy computes every reference in float64/complex128/int64 and the result is
cast to the dtype *our* rules give (PyTorch's and the array API's, which
differ from NumPy's for some ops); the tests assert those rules, not NumPy's.

Compiles dominate the run time (one serial kernel per op and kernel dtype,
~0.3 s each), so one parametrized case covers every axis, layout and
keepdims for an (op, dtype) pair with a single compile, and only one test
compiles parallel variants.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from dispatch_jit.kernels.reduction import codegen as RC, cpu as R
from dispatch_jit.kernels.support.loops import parallel as loops_parallel

DTypeError, ShapeError = R.DTypeError, R.ShapeError
dt = np.dtype

# ---------------------------------------------------------------- the rules, written out independently

BOOL, I8, I16, I32, I64, U8, U64 = map(dt, ["bool", "int8", "int16", "int32", "int64", "uint8", "uint64"])
F16, F32, F64, C64, C128 = map(dt, ["float16", "float32", "float64", "complex64", "complex128"])
TEST_DTYPES = [BOOL, I8, I32, I64, U8, F16, F32, F64, C64]


def _int64_or_same(d):
    return I64 if d.kind in "bi" or (d.kind == "u" and d != U64) else d


EXPECTED_DTYPE = {
    "sum": _int64_or_same,
    "prod": _int64_or_same,
    "mean": lambda d: d,
    "max": lambda d: d,
    "min": lambda d: d,
    "argmax": lambda d: I64,
    "argmin": lambda d: I64,
    "var": lambda d: {C64: F32, C128: F64}.get(d, d),
    "std": lambda d: {C64: F32, C128: F64}.get(d, d),
    "all": lambda d: U8 if d == U8 else BOOL,      # PyTorch's legacy rule for uint8
    "any": lambda d: U8 if d == U8 else BOOL,
    "logsumexp": lambda d: F32 if d.kind in "biu" else d,
}
VALID_KINDS = {"sum": "biufc", "prod": "biufc", "mean": "fc", "max": "biuf", "min": "biuf", "argmax": "biuf",
               "argmin": "biuf", "var": "fc", "std": "fc", "all": "biufc", "any": "biufc", "logsumexp": "biufc"}


def _lse(x, axis, keepdims):
    m = np.max(x.real, axis=axis, keepdims=True) if x.size else np.zeros([1] * x.ndim)
    m = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return r if keepdims else np.squeeze(r, axis=axis)


def _arg(fn):
    def ref(x, axis, keepdims):
        axes = tuple(range(x.ndim)) if axis is None else axis
        kept = [d for d in range(x.ndim) if d not in axes]
        t = x.transpose(kept + sorted(axes)).reshape([x.shape[d] for d in kept] + [-1])
        r = fn(t, axis=-1)
        return r.reshape([1 if d in axes else n for d, n in enumerate(x.shape)]) if keepdims else r
    return ref


def _wide(x):
    """The reference's input: exact widening of ours."""
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64) if x.dtype.kind in "fc" else x


# op -> reference over a widened input, returning float64/complex128/int64/bool
ORACLE = {
    "sum": lambda x, axis, kd: np.sum(_wide(x), axis=axis, keepdims=kd, dtype=None if x.dtype.kind in "fc" else
                                      (np.uint64 if x.dtype == U64 else np.int64)),
    "prod": lambda x, axis, kd: np.prod(_wide(x), axis=axis, keepdims=kd, dtype=None if x.dtype.kind in "fc" else
                                        (np.uint64 if x.dtype == U64 else np.int64)),
    "mean": lambda x, axis, kd: np.mean(_wide(x), axis=axis, keepdims=kd),
    "max": lambda x, axis, kd: np.max(x, axis=axis, keepdims=kd),
    "min": lambda x, axis, kd: np.min(x, axis=axis, keepdims=kd),
    "argmax": _arg(np.argmax),
    "argmin": _arg(np.argmin),
    "var": lambda x, axis, kd: np.var(_wide(x), axis=axis, keepdims=kd),
    "std": lambda x, axis, kd: np.std(_wide(x), axis=axis, keepdims=kd),
    "all": lambda x, axis, kd: np.all(x, axis=axis, keepdims=kd),
    "any": lambda x, axis, kd: np.any(x, axis=axis, keepdims=kd),
    "logsumexp": lambda x, axis, kd: _lse(_wide(x) if x.dtype.kind in "fc" else x.astype(np.float64), axis, kd),
}

# Relative tolerance by result dtype: we accumulate in float64 and round once.
RTOL = {F16: 2e-3, F32: 2e-6, F64: 1e-12, C64: 2e-6, C128: 1e-12}


def _values(d: np.dtype, shape, op: str, rng) -> np.ndarray:
    if d == BOOL:
        return rng.random(shape) < (0.9 if op == "all" else 0.1 if op == "any" else 0.5)
    if d.kind in "iu":
        if op == "prod":   # wraps modulo 2**64 in both: still an exact comparison
            return rng.choice([1, 2, 3] if d.kind == "u" else [-1, 1, 2, 3], shape).astype(d)
        lo, hi = (0, 4) if d.kind == "u" else (-3, 4)
        if op in ("all", "any"):
            return (rng.random(shape) < (0.95 if op == "all" else 0.05)).astype(d) * rng.integers(1, 3, shape).astype(d)
        return rng.integers(lo, hi, shape).astype(d)
    x = rng.standard_normal(shape)
    if op == "prod":
        x = 1 + 0.05 * x
    elif op in ("max", "min", "argmax", "argmin"):
        x = np.round(x * 2) / 2   # many ties: the first index must win
    elif op in ("all", "any"):
        x = np.where(rng.random(shape) < (0.97 if op == "all" else 0.03), x, 0.0)
    if d.kind == "c":
        x = x + 1j * rng.standard_normal(shape) * (0.05 if op == "prod" else 1)
    return x.astype(d)


SHAPE = (5, 7, 40)   # axis (0, 1) of a C array: 35 rows, enough for the 16-row groups (lanes: own test)
AXES = {"all": None, "first": (0,), "last": (2,), "middle": (1,), "first+last": (0, 2), "leading": (0, 1),
        "neg-normalized(-1,-2)": (1, 2), "none": ()}


def _layouts(x: np.ndarray):
    yield "contiguous", x
    yield "transposed", x.transpose(2, 0, 1)
    yield "fortran", np.asfortranarray(x)
    yield "strided", x[:, ::2, ::-1]
    yield "every-other", x[::2, :, 1::2]
    yield "broadcast", np.broadcast_to(x[:, :1, :], x.shape)


def _check(op, got, ref, in_dtype, ctx):
    want = EXPECTED_DTYPE[op](in_dtype)
    assert isinstance(got, np.ndarray), ctx
    assert got.dtype == want, f"{ctx}: dtype {got.dtype} != {want}"
    assert got.shape == np.shape(ref), f"{ctx}: shape {got.shape} != {np.shape(ref)}"
    if want.kind in "fc":
        tol = RTOL[want]
        ref_c = np.asarray(ref).astype(want).astype(np.complex128 if want.kind == "c" else np.float64)
        np.testing.assert_allclose(got.astype(ref_c.dtype), ref_c, rtol=tol, atol=tol * 10, equal_nan=True,
                                   err_msg=ctx)
    else:
        np.testing.assert_array_equal(got, np.asarray(ref).astype(want), err_msg=ctx)


# Each new (op, kernel dtype) is a compile (~0.3-0.6 s), the bulk of this
# file's time.  mean, std and all run sum's, var's and any's kernels, so they
# get every dtype for free; prod, min and argmin are sum, max and argmax with
# the operator flipped in the same template, so they get one dtype per kind.
MIRROR_DTYPES = [BOOL, I32, F16, C64]
DTYPES_BY_OP = {op: MIRROR_DTYPES if op in ("prod", "min", "argmin") else TEST_DTYPES for op in VALID_KINDS}


def _cases():
    for op, kinds in VALID_KINDS.items():
        for d in DTYPES_BY_OP[op]:
            if d.kind in kinds:
                yield pytest.param(op, d, id=f"{op}-{d.name}")


# ---------------------------------------------------------------- the oracle matrix

@pytest.mark.parametrize("op,d", list(_cases()))
def test_matches_numpy(op, d):
    rng = np.random.default_rng(zlib.crc32(f"{op}-{d.name}".encode()))
    f = R.get_reduction(op, d)
    for layout, x in _layouts(_values(d, SHAPE, op, rng)):
        for axname, axis in AXES.items():
            for keepdims in (False, True):
                ctx = f"{op} {d.name} {layout} axis={axname}{axis} keepdims={keepdims}"
                ref = ORACLE[op](x, axis, keepdims)
                _check(op, f(x, axis, keepdims), ref, d, ctx)


@pytest.mark.parametrize("op", ["sum", "max", "argmin", "var", "logsumexp"])
def test_zero_dim_and_vector(op):
    f = R.get_reduction(op, F64)
    for x in (np.array(2.5), np.array([-1.0, 4.0, 4.0, 0.5])):
        for axis in (None, ()) if x.ndim == 0 else (None, (0,), ()):
            got = f(x, axis, False)
            _check(op, got, ORACLE[op](x, axis, False), F64, f"{op} {x.ndim}-d axis={axis}")


def test_uint64_sum_stays_uint64():
    x = np.array([2**63, 2**63 - 1, 5], dtype=np.uint64)
    got = R.get_reduction("sum", U64)(x, None, False)
    assert got.dtype == U64 and int(got) == (2**64 + 4) % 2**64
    assert R.result_dtype("prod", U64) == U64 and R.result_dtype("sum", dt("uint32")) == I64


def test_odd_strides_copy_once():
    # a field of a packed record array: 5-byte strides are no whole float32 elements
    rec = np.zeros((6, 7), dtype=[("a", "f4"), ("b", "u1")])
    rec["a"] = np.arange(42, dtype=np.float32).reshape(6, 7)
    a = rec["a"]
    assert a.strides[1] % a.itemsize
    f = R.get_reduction("sum", F32)
    np.testing.assert_array_equal(f(a, (0,), False), a.sum(axis=0))
    np.testing.assert_array_equal(f(a[:, ::-2], None, True), a[:, ::-2].sum(keepdims=True))


def test_var_std_correction():
    x = np.random.default_rng(0).standard_normal((6, 50)).astype(np.float32)
    for corr in (0, 1, 2):
        for op, ref in (("var", np.var), ("std", np.std)):
            got = R.get_reduction(op, F32)(x, (1,), False, correction=corr)
            np.testing.assert_allclose(got, ref(x.astype(np.float64), axis=1, ddof=corr), rtol=2e-6)
    one = R.get_reduction("var", F64)(np.array([3.0]), None, False, correction=1)
    assert np.isnan(one)   # n - correction == 0: 0/0, as NumPy (ddof) and PyTorch


def test_var_is_two_pass():
    # A large offset breaks the one-pass E[x^2] - E[x]^2 formula.
    x = (1e4 + np.random.default_rng(1).standard_normal(4000)).astype(np.float32)
    got = R.get_reduction("var", F32)(x, None, False)
    assert abs(float(got) - np.var(x.astype(np.float64))) < 1e-5


# ---------------------------------------------------------------- accuracy

def test_float32_sum_accuracy_vs_fsum():
    x = np.random.default_rng(3).random(10**6, dtype=np.float32)
    exact = math.fsum(x.astype(np.float64))
    ours = float(R.get_reduction("sum", F32)(x, None, False))
    theirs = float(np.sum(x))
    ulp = float(np.spacing(np.float32(exact)))
    assert abs(ours - exact) <= max(abs(theirs - exact), ulp), (ours, theirs, exact)
    # and along an axis, where NumPy's float32 sum is not pairwise
    m = x.reshape(1000, 1000)
    ours_ax = R.get_reduction("sum", F32)(m, (0,), False).astype(np.float64)
    exact_ax = np.array([math.fsum(c) for c in m.T.astype(np.float64)])
    assert np.max(np.abs(ours_ax - exact_ax) / exact_ax) <= 2**-24


# ---------------------------------------------------------------- NaN and infinities

@pytest.mark.parametrize("d", [F16, F32, F64])
def test_nan_propagation(d):
    x = np.random.default_rng(4).standard_normal(SHAPE).astype(d)
    x[1, 3, 7] = x[1, 3, 30] = x[4, 0, 39] = x[2, 6, 0] = np.nan
    for op in ("max", "min", "argmax", "argmin", "sum", "mean", "all", "any"):
        f = R.get_reduction(op, d)
        for layout, v in _layouts(x):
            for axis in (None, (0,), (2,), (0, 2)):
                with np.errstate(invalid="ignore"):
                    ref = ORACLE[op](v, axis, False)
                _check(op, f(v, axis, False), ref, d, f"{op} {d.name} {layout} axis={axis}")


def test_logsumexp_infinities():
    f = R.get_reduction("logsumexp", F64)
    x = np.array([[-np.inf, -np.inf], [np.inf, 1.0], [np.inf, -np.inf], [np.nan, 1.0], [1000.0, 1000.0]])
    got = f(x, (1,), False)
    np.testing.assert_array_equal(got[:4], [-np.inf, np.inf, np.inf, np.nan])
    assert got[4] == pytest.approx(1000 + math.log(2))


def test_polynomial_exp_accuracy():
    # logsumexp's exp is range reduction + polynomial (vectorizable); check it against libm
    y = np.concatenate([np.linspace(-708, 0, 3001), np.linspace(0, 709.78, 301), [-1e-300, 1e-300, -0.0]])
    for fn, max_rel in ((RC._exp, 4e-16), (RC._exp_f32, 5e-10)):
        got = np.array([fn(v) for v in y])
        np.testing.assert_allclose(got, np.exp(y), rtol=max_rel, atol=0)
        assert [fn(v) for v in (-np.inf, -708.5, 709.8, np.inf)] == [0.0, 0.0, np.inf, np.inf]
        assert np.isnan(fn(np.nan))


# ---------------------------------------------------------------- empty inputs

def test_empty_reductions():
    e = np.zeros((0, 3), np.float32)
    assert R.get_reduction("sum", F32)(e, None, False) == 0
    assert R.get_reduction("sum", I32)(np.zeros((0,), np.int32), None, False).dtype == I64
    assert R.get_reduction("prod", F32)(e, (0,), False).tolist() == [1, 1, 1]
    assert np.isnan(R.get_reduction("mean", F32)(e, None, False))
    assert R.get_reduction("all", F32)(e, None, False) and not R.get_reduction("any", F32)(e, None, False)
    assert R.get_reduction("logsumexp", F32)(e, None, False) == -np.inf
    # kept axis empty, reduced axis not: an empty result, even for max
    assert R.get_reduction("max", F32)(e, (1,), False).shape == (0,)
    assert R.get_reduction("sum", F32)(e, (1,), True).shape == (0, 1)
    for op in ("max", "min", "argmax", "argmin"):
        with pytest.raises(ShapeError, match=rf"{op}\(\): cannot reduce over a zero-size axis.*no identity; pass"):
            R.get_reduction(op, F32)(e, (0,), False)
    with pytest.raises(ValueError):   # ShapeError is a ValueError
        R.get_reduction("max", F32)(e, None, False)


# ---------------------------------------------------------------- errors

def test_dtype_errors():
    with pytest.raises(DTypeError, match=r"mean\(\) needs a floating or complex input; cast with "
                                         r"\.to\(dj\.float32\)"):
        R.get_reduction("mean", I32)
    with pytest.raises(DTypeError, match="supported dtypes: float16, float32, float64, complex64, complex128"):
        R.result_dtype("var", I64)
    with pytest.raises(DTypeError, match=r"max\(\).*complex.*supported dtypes: bool, int8"):
        R.get_reduction("max", C64)
    with pytest.raises(TypeError, match="supported dtypes"):   # DTypeError is a TypeError
        R.get_reduction("sum", dt("datetime64[s]"))
    with pytest.raises(DTypeError, match="got a float64 array"):
        R.get_reduction("sum", F32)(np.zeros(3), None, False)


@pytest.mark.parametrize("axis", [(3,), (-1,), (0, 0), (0.0,), [0], 1])
def test_bad_axis(axis):
    with pytest.raises(ShapeError, match="axis must be None or a tuple of distinct ints"):
        R.get_reduction("sum", F32)(np.zeros((2, 3, 4), np.float32), axis, False)


def test_result_dtype_table():
    for op, rule in EXPECTED_DTYPE.items():
        for d in TEST_DTYPES + [I16, U64, C128]:
            if d.kind in VALID_KINDS[op]:
                assert R.result_dtype(op, d) == rule(d), (op, d)
            else:
                with pytest.raises(DTypeError):
                    R.result_dtype(op, d)


# ---------------------------------------------------------------- caching and parallel

def test_callables_and_kernels_are_cached():
    f = R.get_reduction("sum", F32)
    assert R.get_reduction("sum", F32) is f
    f(np.ones(3, np.float32), None, False)
    sigs = R.compiled_signatures()
    assert "float32" in sigs["sum"]
    n = len(RC._ENTRY)
    f(np.ones((4, 5), np.float32), (0,), True)
    assert len(RC._ENTRY) == n   # a new shape, axis or layout compiles nothing


def test_parallel_variant_just_above_threshold(monkeypatch):
    monkeypatch.setattr(loops_parallel, "PARALLEL", True)   # whatever the probe says on this machine
    n = R.PARALLEL_THRESHOLD + 1001
    x = np.random.default_rng(5).random(n, dtype=np.float32)
    x[n // 2 + 3] = 2.0
    x[n - 5] = 2.0   # a tie in a later chunk: the first index must win
    f = R.get_reduction("sum", F32)
    exact = math.fsum(x.astype(np.float64))
    assert abs(float(f(x, None, False)) - exact) <= np.spacing(np.float32(exact))
    assert "float32 parallel:chunks" in R.compiled_signatures()["sum"]
    g = R.get_reduction("argmax", F32)
    assert int(g(x, None, False)) == n // 2 + 3
    x[n - 7] = np.nan
    x[n - 3] = np.nan
    assert int(g(x, None, False)) == n - 7


# ---------------------------------------------------------------- lane blocks (long contiguous runs)

@pytest.mark.parametrize("op,d", [("argmax", F32), ("max", F64), ("logsumexp", F32)])   # min/argmin: mirrors
def test_lane_kernel_long_runs(op, d):
    # Rows longer than _LANE_MIN run the lanes kernel: ties spread over lanes,
    # NaN in a lane block and in the tail, and a row that is all ties.
    n = RC.LANE_MIN + 300
    rng = np.random.default_rng(6)
    x = np.round(rng.standard_normal((4, n)) * 2).astype(d)
    x[1, 700] = x[1, 40] = np.nan
    x[2, n - 3] = np.nan
    x[3] = 1.5
    f = R.get_reduction(op, d)
    for v, axis in ((x, (1,)), (x[::-1], (1,)), (x[0], None), (x[1], None)):
        with np.errstate(invalid="ignore"):
            ref = ORACLE[op](v, axis, False)
        _check(op, f(v, axis, False), ref, d, f"{op} {d.name} lanes axis={axis}")
    assert f"{d.name} lanes" in R.compiled_signatures()[op]


# ---------------------------------------------------------------- the full-reduction shortcut

@pytest.mark.parametrize("op", ["sum", "mean", "amax", "argmin", "logsumexp"])
@pytest.mark.parametrize("dtype", [F32, F64, I32])
def test_full_reduction_shortcut_equals_the_planned_path(op, dtype):
    """``x.sum()`` of a contiguous tensor takes reduce.full (no plan, one kernel call): the same
    kernel, arguments and bits as the planned path over every axis, lanes kernel included."""
    import dispatch_jit as dj
    from dispatch_jit.registry import lookup
    if op in ("logsumexp", "mean") and dtype == I32:
        pytest.skip("mean refuses int32, logsumexp casts it to float32 (the planned path)")
    rng = np.random.default_rng(7)
    for n in (1, 17, 2049):
        a = (rng.standard_normal((n, 2)) * 50).astype(dtype)
        fn = getattr(dj, op)
        got = fn(dj.tensor(a))
        axes = 0 if op == "argmin" else (0, 1)
        want = fn(dj.tensor(a), axis=axes) if op != "argmin" else fn(dj.tensor(a.reshape(-1)), axis=0)
        assert got.shape == () and got.dtype == want.dtype
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    entry = lookup("aten::" + ("max" if op == "amax" else "min" if op == "amin" else op))
    assert any(getattr(f, "__name__", "") == "run_full" for f in entry.memo.values())
